import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchmark.models import Condition, EvaluationRun
from stats import selectors, tables
from stats.compute.bradley_terry import TIE_RULES
from stats.compute.resampling import BATTLE_RESAMPLES, BATTLE_RESAMPLES_RANGE, DEFAULT_SEED
from stats.exports import table_csv
from stats.release_files import ReleaseFileError


class Command(BaseCommand):
    help = (
        "Write one statistics table as CSV or JSON (the same numbers as the dashboard and the "
        "API). Run tables read a run's verdicts; study tables read an annotation study, or the "
        "official release's human_eval files with --release-dir."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "table", choices=[spec.name for spec in tables.all_specs()], help="which table"
        )
        parser.add_argument(
            "--run",
            type=int,
            help="evaluation run id (default: the pinned run, else the newest finished)",
        )
        parser.add_argument("--study", type=int, help="annotation study id (study tables)")
        parser.add_argument(
            "--include-excluded",
            action="store_true",
            help="study tables: count the raters the study excludes (default: left out)",
        )
        parser.add_argument(
            "--verdicts",
            default="primary",
            help="verdict source: primary, adjudicated, or a judge's handle (default: primary); "
            "with --battles judge, the pairwise judge ranked: primary or a pairwise judge's name",
        )
        parser.add_argument(
            "--condition", choices=Condition.values, default=Condition.VANILLA, help="replies"
        )
        parser.add_argument("--format", choices=["csv", "json"], default="csv")
        parser.add_argument(
            "--seed", type=int, default=DEFAULT_SEED, help="bootstrap base seed (0 or more)"
        )
        parser.add_argument(
            "--release-dir",
            type=Path,
            help="the official release's folder (with [dataset/]human_eval/): study tables "
            "computed from its raw human-eval files",
        )
        parser.add_argument(
            "--majority",
            choices=["drop", "release"],
            default="drop",
            help="majority label vs judge (human-agreement, judge-human-alignment): drop items "
            "whose top labels tie (default), or break ties Partial > Pass > Fail as the "
            "ProactBench release does",
        )
        parser.add_argument(
            "--stream",
            choices=["app", "release"],
            default="app",
            help="preference table's item-clustered bootstrap: the app's seeded stream "
            "(default), or the release's (numpy.random.default_rng(seed), items in file order; "
            "with --seed 2026 it reproduces the published CI)",
        )
        parser.add_argument(
            "--battles",
            choices=selectors.BATTLE_SOURCES,
            default="study",
            help="ranking tables (arena-ranking, arena-pairs): where the battles come from: "
            + " or ".join(selectors.BATTLE_SOURCES)
            + " (study: the live answers of the arena or pairwise study given by --study, the "
            "default; judge: the consistent verdicts of the pairwise judge given by --verdicts "
            "on the run given by --run, default the pinned run, else the newest finished)",
        )
        parser.add_argument(
            "--ties",
            choices=TIE_RULES,
            default="half",
            help="ranking tables: a tie counts as half a win to each side (half, default), or "
            "ties are left out (exclude)",
        )
        parser.add_argument(
            "--anchor",
            default="",
            help="ranking tables: the source whose rating is fixed at 1000 (default: the mean "
            "rating is 1000)",
        )
        parser.add_argument(
            "--resamples",
            type=int,
            default=BATTLE_RESAMPLES,
            help="ranking tables: bootstrap resamples of the battles "
            f"({BATTLE_RESAMPLES_RANGE[0]:,} to {BATTLE_RESAMPLES_RANGE[1]:,}; default "
            f"{BATTLE_RESAMPLES:,})",
        )
        parser.add_argument("--out", type=Path, help="write here instead of standard output")

    def handle(
        self,
        *args,
        table,
        run,
        study,
        include_excluded,
        verdicts,
        condition,
        format,
        seed,
        release_dir,
        majority,
        stream,
        battles,
        ties,
        anchor,
        resamples,
        out,
        **options,
    ):
        spec = tables.get(table)  # one of the choices
        if seed < 0:  # NumPy's SeedSequence refuses a negative seed (the API says the same)
            raise CommandError(f"--seed must be a non-negative integer, not {seed}")
        if run is not None:
            run_obj = EvaluationRun.objects.filter(pk=run).first()
            if run_obj is None:
                raise CommandError(f"no run {run}")
        else:
            # A run table reads a run, and so does a ranking of a pairwise judge's battles.
            reads_run = spec.needs == tables.RUN or battles == "judge"
            run_obj = selectors.default_run() if reads_run else None
        request = selectors.TableRequest(
            run=run_obj,
            verdicts=selectors.VerdictSource.parse(verdicts),
            condition=condition,
            study=study,
            include_excluded=include_excluded,
            release_dir=release_dir,
            seed=seed,
            majority=majority,
            stream=stream,
            battles=battles,
            ties=ties,
            anchor=anchor,
            resamples=resamples,
        )
        try:
            result = tables.build(table, request)
        except (selectors.StatsInputError, ReleaseFileError) as exc:
            raise CommandError(str(exc)) from exc
        text = (
            table_csv(result)
            if format == "csv"
            else json.dumps(result.as_json(), indent=2, ensure_ascii=False) + "\n"
        )
        for note in result.notes:
            self.stderr.write(f"note: {note}")
        if out is None:
            self.stdout.write(text, ending="")
        else:
            try:
                out.write_text(text, encoding="utf-8", newline="")
            except OSError as exc:  # a folder, a missing folder, no permission, a full disk
                raise CommandError(f"cannot write {out}: {exc.strerror}") from exc
            self.stderr.write(f"{len(result.rows)} row(s) of {table} written to {out}")
