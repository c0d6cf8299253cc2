"""The claims ledger of papers 000–004: experiments, runner helpers and the ledger file.

`ledger` (entries, shape checks, merge), `digits_runs` (fast in-memory digits
training), `probes` (per-layer measurements), `paper000` … `paper004` (one
module of experiments per paper), `experiments` (imports them all).
"""
