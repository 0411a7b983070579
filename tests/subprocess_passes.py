"""The end of a subprocess script that runs its calls in passes (test_kernel_traps,
test_device_side_errors): the first pass compiles, each later one finds the kernels on
disk, the tables and open stores forgotten. The script defines `passes` and `run_all()`
(its results as a JSON-able dict) and imports json and eagerc; it prints one line,
``RESULT`` and a list of {"results", "compiles", "disk_loads"}, one per pass."""

RUN_PASSES = """
runs = []
for p in range(passes):
    if p:  # the kernels again, from disk: the tables and open stores forgotten
        from eagerc.cache import service
        service().reset()
        eagerc._C._clear_tables()
        eagerc.reset_stats()
    results = run_all()
    s = eagerc.stats()
    runs.append({"results": results, "compiles": s["compiles"], "disk_loads": s["disk_loads"]})
print("RESULT " + json.dumps(runs))
"""
