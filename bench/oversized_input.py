"""Oversized-input benchmark (issue #14, F5): a 1 GB corpus file holding one 200 MB line among
normal ones, the same 200 MB line in a file under the file cap, and a results file with one
200 MB reply, fed through the command line (``manage.py import_corpus``, ``import_results``)
and the admin's corpus upload (gunicorn, a logged-in superuser, the file streamed in a
multipart POST); then evidence grading and highlighting of a 1 MB reply.

Targets: every oversized input refused with its line number (the file cap, 256 MiB, refuses the
1 GB file at line 1 before reading it; the record cap, 8 MiB, the 200 MB line by its number),
peak RSS growth ≤ 100 MB on each path, grading a 1 MB reply ≤ 50 ms (median).

    python bench/oversized_input.py                           # the issue's sizes (~1.4 GB on disk)
    python bench/oversized_input.py --corpus-mb 300 --line-mb 40   # a quick run

The files are written to a temporary folder (streamed, never held in memory) and removed at the
end; the admin upload puts a second copy in the server's temporary folder while it is received.
The database is SQLite in that folder. Peak RSS of a command is its own (``os.wait4``), its
growth over the same command on the normal lines alone; the server's is its worker's peak
(``VmHWM``) over its resident memory after a warm-up request. Ends with a RESULT line carrying
the machine's speed (bench/machine.py).
"""

from __future__ import annotations

import argparse
import html
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from _workers import free_port, wait_for_port  # noqa: E402
from machine import speed_probe  # noqa: E402

DEMO = ROOT / "benchmark" / "demo_data" / "dialogues.jsonl"
MB = 1_000_000
FILE_CAP = int(os.environ.get("PROACTBENCH_MAX_FILE_BYTES", 256 * 1024 * 1024))
CHUNK = 1 << 20
FILLER = ("The reply goes on and on, as an oversized input does. " * (CHUNK // 55 + 1))[:CHUNK]
RSS_TARGET_MB = 100
GRADE_TARGET_MS = 50
LINE_NUMBER = re.compile(r"\bline (\d+)\b")


# --- Generated files --------------------------------------------------------------------------


def _demo_records() -> list[dict]:
    with DEMO.open(encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def _write_huge_line(out, record: dict, path: tuple, size: int) -> None:
    """``record`` as one JSON line whose string at ``path`` is ``size`` bytes of filler,
    written in chunks: the line is never in memory."""
    marker = f"@@{uuid.uuid4().hex}@@"
    target = record
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = marker
    head, tail = json.dumps(record).split(marker)
    out.write(head)
    written = 0
    while written < size:
        piece = FILLER[: min(CHUNK, size - written)]
        out.write(piece)
        written += len(piece)
    out.write(tail + "\n")


def write_corpus(path: Path, *, total: int, line: int, records: list[dict]) -> int:
    """Normal lines (the demo dialogues, copied under fresh ids) up to ``total`` bytes, the
    ``line``-byte one in the middle. Returns the big line's number."""
    normal = [json.dumps(r) + "\n" for r in records]
    per_pass = sum(len(n) for n in normal)
    passes = max(1, (total - line) // per_pass)
    number = 0
    big_at = 0
    with path.open("w", encoding="utf-8") as out:
        for copy in range(passes):
            for record, text in zip(records, normal, strict=True):
                if copy:
                    text = text.replace(record["uuid"], f"{copy:08x}{record['uuid'][8:]}")
                out.write(text)
                number += 1
            if line and copy == passes // 2:
                big = json.loads(normal[0])
                big["uuid"] = "f" * 32
                big["unique_id_eval"] = big["unique_id_eval"].rsplit("__", 1)[0] + "__" + "f" * 32
                _write_huge_line(out, big, ("turn_records", 0, "user_message"), line)
                number += 1
                big_at = number
    return big_at


def result_records(records: list[dict]) -> list[dict]:
    """The demo dialogues as the release's results files have them: each trigger scored PASS,
    its evidence a quote from the reply (the turn's assistant response)."""
    out = []
    for record in records:
        turns = record["turn_records"]
        out.append(
            {
                "unique_id_eval": record["unique_id_eval"],
                "evaluated_model": "bench-oversized-model",
                "trigger_points": [
                    {
                        "turn": tp["turn"],
                        "evaluation_result": {
                            "status": "EVALUATED",
                            "score": "PASS",
                            "rationale": "Meets the pass criteria.",
                            "evidence": turns[tp["turn"] - 1]["assistant_response"][:60],
                        },
                    }
                    for tp in record["trigger_points"]
                ],
                "turn_records": [
                    {
                        "turn": t["turn"],
                        "user_message": t["user_message"],
                        "assistant_response": t["assistant_response"],
                    }
                    for t in turns
                ],
            }
        )
    return out


def write_results(path: Path, *, line: int | None, records: list[dict]) -> int:
    """The demo results, with (``line`` bytes) one reply that long in the middle line."""
    results = result_records(records)
    big_at = 0
    with path.open("w", encoding="utf-8") as out:
        for number, record in enumerate(results, start=1):
            if line and number == len(results) // 2 + 1:
                turn = record["trigger_points"][0]["turn"]
                _write_huge_line(
                    out, record, ("turn_records", turn - 1, "assistant_response"), line
                )
                big_at = number
            else:
                out.write(json.dumps(record) + "\n")
    return big_at


# --- Measuring a command ------------------------------------------------------------------------


def manage(args: list[str], env: dict, log: Path) -> tuple[int, float, str]:
    """Run ``manage.py args``: (exit status, its own peak RSS in MB, its output)."""
    with log.open("w") as out:
        child = subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, stdout=out, stderr=out
        )
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_maxrss / 1024, log.read_text(errors="replace")


def refused_at(output: str) -> str:
    """The line numbers an error output names ("1", "12, 40"), or "—"."""
    numbers = sorted({int(n) for n in LINE_NUMBER.findall(output)})
    return ", ".join(map(str, numbers[:5])) or "—"


# --- The admin upload -------------------------------------------------------------------------


def _status_kb(pid: int, field: str) -> int:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def _worker_of(master: int) -> int:
    for _ in range(100):
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[1]) == master:
                    return int(entry.name)
        time.sleep(0.1)
    raise RuntimeError("gunicorn started no worker")


def superuser_session(env: dict) -> str:
    """A superuser and a logged-in session for it, in the benchmark's database: the session key."""
    code = (
        "import django; django.setup();"
        "from django.contrib.auth import get_user_model;"
        "from django.test import Client;"
        "user = get_user_model().objects.create_superuser('bench-admin', '', 'x');"
        "client = Client(); client.force_login(user);"
        "print(client.cookies['sessionid'].value)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


class AdminUpload:
    """gunicorn (one sync worker) serving the app; posts files to the admin's corpus import."""

    PATH = "/admin/benchmark/dialogue/import/"

    def __init__(self, env: dict, session: str):
        self.port = free_port()
        self.session = session
        self.server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "proactweb.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                "1",
                "--timeout",
                "900",  # receiving a 1 GB upload takes a while
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
        )
        if not wait_for_port(self.port):
            self.server.kill()
            sys.exit("gunicorn did not start")
        self.worker = _worker_of(self.server.pid)

    def close(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=30)

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)

    def form(self) -> tuple[str, str]:
        """GET the form: (CSRF cookie, form token)."""
        conn = self._connection()
        conn.request("GET", self.PATH, headers={"Cookie": f"sessionid={self.session}"})
        response = conn.getresponse()
        page = response.read().decode()
        if response.status != 200:
            raise RuntimeError(f"import page: HTTP {response.status}")
        cookie = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie") or "")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if not cookie or not token:
            raise RuntimeError("no CSRF token on the import page")
        return cookie.group(1), token.group(1)

    def post(self, path: Path) -> tuple[int, str, float]:
        """Upload ``path`` (streamed from disk): (HTTP status, page, worker's RSS growth MB)."""
        cookie, token = self.form()  # also the warm-up request
        rss_before = _status_kb(self.worker, "VmRSS")
        boundary = uuid.uuid4().hex
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'
            f"{token}\r\n"
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
            f'filename="{path.name}"\r\nContent-Type: application/octet-stream\r\n\r\n'
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        conn = self._connection()
        conn.putrequest("POST", self.PATH)
        conn.putheader("Cookie", f"sessionid={self.session}; csrftoken={cookie}")
        conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
        conn.putheader("Content-Length", str(len(head) + path.stat().st_size + len(tail)))
        conn.endheaders()
        conn.send(head)
        with path.open("rb") as stream:
            while chunk := stream.read(CHUNK):
                conn.send(chunk)
        conn.send(tail)
        response = conn.getresponse()
        page = response.read().decode(errors="replace")
        growth = (_status_kb(self.worker, "VmHWM") - rss_before) / 1024
        return response.status, page, growth


# --- Grading and highlighting a 1 MB reply ------------------------------------------------------


def _measure_text(size: int, repeat: int) -> dict:
    """Runs in a child process: median ms of grading and highlighting a ``size``-byte reply."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proactweb.settings")
    django.setup()
    from annotation.highlight import highlight
    from benchmark.evaluation.evidence import grade_evidence

    replies = [t["assistant_response"] for r in _demo_records() for t in r["turn_records"]]
    text = "\n\n".join(replies)
    reply = (text * (size // len(text) + 1))[:size]
    tail = reply[-4000:]
    # As the release's judge writes them: an exact fragment near the end, one with a typo, and
    # one the reply does not contain (the costliest: the fuzzy search covers the whole reply).
    exact = " ".join(tail.split()[5:17])
    words = tail.split()[40:52]
    typo = " ".join(words)[:-2] + "xq" + " ".join(words)[-1:]
    evidence = f'"{exact}" … "{typo}" … "a fragment that this reply never contains anywhere"'
    grade_ms, highlight_ms = [], []
    grade = grade_evidence(evidence, reply)
    marks = [("judge-a", evidence), ("judge-b", f'"{exact}"')]
    marked = highlight(reply, marks)
    for _ in range(repeat):
        started = time.perf_counter()
        grade_evidence(evidence, reply)
        grade_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        highlight(reply, marks)
        highlight_ms.append((time.perf_counter() - started) * 1000)
    return {
        "grade_ms": round(statistics.median(grade_ms), 1),
        "highlight_ms": round(statistics.median(highlight_ms), 1),
        "grade": grade.status,
        "found": grade.found_share,
        "highlight_kb": round(len(marked) / 1024),
    }


# --- The run ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus-mb", type=int, default=1000, help="the big corpus file's size")
    parser.add_argument("--line-mb", type=int, default=200, help="the oversized line's size")
    parser.add_argument("--reply-mb", type=float, default=1.0, help="the graded reply's size")
    parser.add_argument("--repeat", type=int, default=7, help="timed gradings (median)")
    parser.add_argument("--measure-text", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_text:
        print(json.dumps(_measure_text(int(args.reply_mb * MB), args.repeat)))
        return

    need = (args.corpus_mb * 2 + args.line_mb * 3) * MB
    with tempfile.TemporaryDirectory(prefix="proactbench-oversized-") as tmp:
        tmp_path = Path(tmp)
        free = shutil.disk_usage(tmp_path).free
        if free < need * 1.2:
            sys.exit(f"{free / 1e9:.1f} GB free in {tmp_path.parent}; ~{need / 1e9:.1f} GB needed")
        print(f"{free / 1e9:.0f} GB free; writing the files to {tmp_path}", flush=True)
        env = {
            **os.environ,
            "PROACTWEB_VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "proactweb.settings",
            "TMPDIR": str(tmp_path),  # the server's spooled upload, removed with the folder
        }
        env.pop("DATABASE_URL", None)  # the embedded default: SQLite in the temporary folder
        records = _demo_records()
        files = {
            "normal corpus": tmp_path / "normal.jsonl",
            "corpus, 1 GB": tmp_path / "corpus-big.jsonl",
            "corpus, under the file cap": tmp_path / "corpus-line.jsonl",
            "normal results": tmp_path / "normal_results.jsonl",
            "results, one huge reply": tmp_path / "results-line.jsonl",
        }
        started = time.perf_counter()
        write_corpus(files["normal corpus"], total=0, line=0, records=records)
        big_line = {
            "corpus, 1 GB": write_corpus(
                files["corpus, 1 GB"], total=args.corpus_mb * MB, line=args.line_mb * MB,
                records=records,
            ),
            "corpus, under the file cap": write_corpus(
                files["corpus, under the file cap"], total=args.line_mb * MB + MB,
                line=args.line_mb * MB, records=records,
            ),
            "results, one huge reply": write_results(
                files["results, one huge reply"], line=args.line_mb * MB, records=records
            ),
        }  # fmt: skip
        write_results(files["normal results"], line=None, records=records)
        print(f"files written in {time.perf_counter() - started:.1f} s", flush=True)
        logs = tmp_path / "logs"
        logs.mkdir()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env,
            check=True,
        )  # fmt: skip

        rows = []

        def command(label: str, args_: list[str], baseline_mb: float | None) -> float:
            status, peak, output = manage(args_, env, logs / f"{len(rows)}.log")
            path = Path(args_[-1])
            rows.append(
                {
                    "path": label,
                    "file_mb": round(path.stat().st_size / MB, 1),
                    "big_line": big_line.get(_label_of(files, path), "—"),
                    "expected": _expected(path, big_line.get(_label_of(files, path))),
                    "outcome": "imported" if status == 0 else "refused",
                    "refused_at": refused_at(output) if status else "—",
                    "peak_mb": round(peak, 1),
                    "growth_mb": round(peak - baseline_mb, 1) if baseline_mb else "—",
                    "message": _first_error(output) if status else output.strip().splitlines()[0],
                }
            )
            return peak

        base = command("CLI import_corpus", ["import_corpus", str(files["normal corpus"])], None)
        for label in ("corpus, 1 GB", "corpus, under the file cap"):
            command("CLI import_corpus", ["import_corpus", str(files[label])], base)
        base = command("CLI import_results", ["import_results", str(files["normal results"])], None)
        command(
            "CLI import_results", ["import_results", str(files["results, one huge reply"])], base
        )

        session = superuser_session(env)
        server = AdminUpload(env, session)
        try:
            for label in ("corpus, 1 GB", "corpus, under the file cap"):
                path = files[label]
                status, page, growth = server.post(path)
                listed = re.search(
                    r'<pre class="errors" id="import-errors">(.*?)</pre>', page, re.S
                )
                errors = html.unescape(listed.group(1)).splitlines() if listed else []
                message = next((e for e in errors if LINE_NUMBER.search(e)), f"HTTP {status}")
                rows.append(
                    {
                        "path": "admin upload",
                        "file_mb": round(path.stat().st_size / MB, 1),
                        "big_line": big_line[label],
                        "expected": _expected(path, big_line[label]),
                        "outcome": "refused" if errors else f"HTTP {status}",
                        "refused_at": refused_at(message),
                        "peak_mb": "—",
                        "growth_mb": round(growth, 1),
                        "message": message[:110],
                    }
                )
        finally:
            server.close()

        text = subprocess.run(
            [sys.executable, __file__, "--measure-text", "--reply-mb", str(args.reply_mb),
             "--repeat", str(args.repeat)],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        timing = json.loads(text.stdout.strip().splitlines()[-1])

    probe = speed_probe()
    print(
        f"\n{'path':<20}{'file MB':>9}{'big line':>10}{'outcome':>10}{'refused at':>12}"
        f"{'peak RSS MB':>13}{'growth MB':>11}  message"
    )
    for row in rows:
        print(
            f"{row['path']:<20}{row['file_mb']:>9}{row['big_line']!s:>10}{row['outcome']:>10}"
            f"{row['refused_at']:>12}{row['peak_mb']!s:>13}{row['growth_mb']!s:>11}  "
            f"{row['message']}"
        )
    print(
        f"\n{args.reply_mb:g} MB reply: evidence grading {timing['grade_ms']} ms "
        f"(median of {args.repeat}; grade {timing['grade']}, {timing['found']:.0%} of fragments "
        f"found), highlighting {timing['highlight_ms']} ms ({timing['highlight_kb']} kB of HTML: "
        "cut for display, the rest folded)"
    )

    def growth(path: str) -> float:
        return max(r["growth_mb"] for r in rows if r["path"] == path and r["growth_mb"] != "—")

    # The file cap refuses a file larger than it at line 1, unread; the record cap the line.
    refused_by_line = all(
        r["outcome"] == "refused" and str(r["expected"]) in r["refused_at"].split(", ")
        for r in rows
        if r["expected"]
    )
    figures = {
        "corpus_cli_rss_growth_mb": growth("CLI import_corpus"),
        "corpus_admin_rss_growth_mb": growth("admin upload"),
        "results_cli_rss_growth_mb": growth("CLI import_results"),
    }
    ok = (
        refused_by_line
        and all(v <= RSS_TARGET_MB for v in figures.values())
        and timing["grade_ms"] <= GRADE_TARGET_MS
    )
    print(
        "RESULT "
        + " ".join(f"{k}={v}" for k, v in figures.items())
        + f" grade_1mb_ms={timing['grade_ms']} highlight_1mb_ms={timing['highlight_ms']}"
        f" corpus_mb={args.corpus_mb} line_mb={args.line_mb} refused_by_line={refused_by_line}"
        f" probe_hot_ms={probe['hot_ms']:.1f} probe_idle_ms={probe['idle_ms']:.1f} ok={ok}"
    )


def _expected(path: Path, big_line: int | None) -> int | None:
    """The line an oversized file must be refused at: 1 for a file over the file cap (refused
    before it is read), else its big line; None for a file of normal lines."""
    if big_line is None:
        return None
    return 1 if path.stat().st_size > FILE_CAP else big_line


def _label_of(files: dict[str, Path], path: Path) -> str:
    return next((label for label, p in files.items() if p == path), "")


def _first_error(output: str) -> str:
    for row in output.splitlines():
        if LINE_NUMBER.search(row):
            return row.strip()[:110]
    return output.strip().splitlines()[-1][:110] if output.strip() else ""


if __name__ == "__main__":
    main()
