"""Table tooling: the supported-ops pages (:mod:`.docs`), table diffs (:mod:`.diff`), the tables
made from vendor documentation (:mod:`.from_docs`, facts in ``doc_facts/``) and the release
checks (:mod:`.releases`). Driven by ``npucheck tables ...``; no pytest or torch imports."""
