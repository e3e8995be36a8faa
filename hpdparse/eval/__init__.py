"""`hpdparse eval`: score Markdown against ground truth the way OmniDocBench's end-to-end
evaluation does (docs/eval.md).

inputs reads the truth and finds the predictions; extract reads a page's Markdown into
elements; normalize, matching, merging and teds are OmniDocBench's normal forms, matcher and
table metric; page scores one page (in a worker process); aggregate gathers the figures; run
drives a run; report writes report.json, the terminal table and the HTML page.

Needs the `eval` extra (apted, beautifulsoup4, pylatexenc, scipy, lxml).
"""
