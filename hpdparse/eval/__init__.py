"""`hpdparse eval`: score Markdown against ground truth the way OmniDocBench's end-to-end
evaluation does (docs/eval.md).

records holds what passes between the modules (truth pages and blocks, elements, pairs,
scored pages); inputs reads the truth once into records and finds the predictions; extract
reads a page's Markdown into elements; normalize, matching, merging and teds are
OmniDocBench's normal forms, matcher and table metric; page scores one page (in a worker
process); aggregate gathers the figures; run drives a run into a Report; report turns it into
report.json (its only JSON), the terminal table and the HTML page.

Needs the `eval` extra (apted, beautifulsoup4, pylatexenc, scipy, lxml).
"""
