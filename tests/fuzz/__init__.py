"""The house rule on bad input, as a checker: mutate a valid input, run the CLI in-process, and judge
what came back.

A command given bad input must end with exit code 2 and one line on stderr naming the field or file
and the reason, and leave no output behind; a command that succeeds must not have written a number it
cannot stand behind (NaN, infinity, a negative time). `judge.judge` returns the broken rules, so that
the test module (hypothesis, in CI: tests/test_fuzz_inputs.py) and `benchmarks/fuzz_inputs.py` (many
more cases, a summary) share one definition of "broken". `mutations` changes documents and bytes,
`bases` makes the valid inputs once, `targets` makes one case per input edge of the CLI.
"""
