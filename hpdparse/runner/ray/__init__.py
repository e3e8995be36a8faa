"""`hpdparse convert --ray`: the same conversion on a Ray cluster, through Ray Data.

Data flow, one module per step:
- settings: where the cluster is and how many engine actors (`RaySettings`), no Ray needed;
- cluster: connect to (or start) the cluster, the one place `import ray` first happens; Ray
  Data's context for the run;
- units: the driver plans every document with the plan stage (`runner.plan`) and cuts the pages
  still to decode into small `WorkUnit`s (a document and a few of its pages), the rows of the
  Ray Dataset; page images never travel through Ray, each actor rasterizes its own pages;
- engine_feed: inside an actor, one rasterizer pool and one engine run shared by every unit the
  actor holds (a live source), so it keeps --batch-size pages in flight;
- actor: `PageDecoder`, the stateful `map_batches` class: holds the engine, saves each page's raw
  record through the store and returns one small result row per page (`units.PageRow`);
- run_book: a small actor of the run on the driver's node: attempts per unit, and the actors'
  heartbeats (which of them are alive, how often Ray restarted one);
- driver: `RayConverter`, the run: dataset, results as they stream, documents finished as soon as
  all their pages are in, the run report with per-actor figures;
- watch: the driver's threads while it waits for rows: actors alive to the progress, and the end
  of a run no row comes back to.

Plain `convert` never imports this package's Ray modules: `hpdparse.api` imports the driver
only when `ray=` is given.
"""
