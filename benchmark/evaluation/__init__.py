"""Evaluation runs: replaying frozen dialogues to models at trigger turns, judging the replies,
and the release's results format both ways."""
