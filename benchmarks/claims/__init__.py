"""The claims ledger of papers 000–004: criteria, experiments, runner helpers and the ledger file.

`criteria` (each claim's test declared as data), `power` (95 % intervals from
seeds and test-set size), `ledger` (entries, shape checks, judging, history,
merge), `digits_runs` (fast in-memory digits training), `probes` (per-layer
measurements), `paper000` … `paper004` (each paper's criteria and experiments;
`paper000_depth24` depth 24 and fine-tuning, `paper001_threshold` the
learning-rate threshold study,
`paper002_teacher` the convolution teacher, `paper002_long` Figs. 2–3 on a
long run), `experiments` (imports them all).
"""
