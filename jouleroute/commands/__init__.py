"""Commands that are not pipeline stages: `where`, `check-params`, `repro`, `serve`, `flow`.

They read the same params file as the stages but produce no DVC output.
"""
