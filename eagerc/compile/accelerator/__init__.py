"""Accelerator decompositions: what a target with no kernels of its own to lean on (a
vendor's device, the eagerc device with aliases off) traces ops into, so that they become
generated code instead of a host round trip.

- ``decompositions``: the table (scans, median, histograms, isin, take, bucketize, ...) and
  the rest of this package's tables joined;
- ``random_ops``, ``linalg``, ``lu``, ``cholesky``, ``resample``: one family each;
- ``special`` and ``polynomials``: special functions for code generators Inductor gives no
  implementation of them;
- ``value_checks``: a check on the call's values, host code only.
"""
