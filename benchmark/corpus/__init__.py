"""Reading, checking and writing the ProactBench corpus (release format)."""
