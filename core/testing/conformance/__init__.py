"""Loom's backend conformance suite, shipped in the package: run it against any installed target kind.

::

    pytest --pyargs loom.testing.conformance --loom-kind=yourkind [pytest options, e.g. -n 2]
    python -m loom.testing.conformance --loom-kind=yourkind [pytest options]

(The plugin is registered with pytest through the ``pytest11`` entry point of
Loom's core distribution; where entry points are off, add ``-p loom.testing.conformance.plugin``.)

Each test runs once per kind (``--loom-kind=a,b``; default: every installed
kind whose plugin implements ``loom_backend``) and compares the kind's results
with numpy or with the reference interpreter (:func:`loom.testing.evaluate`):

* ``test_programs``: end-to-end programs (matmul schedules, pipelines with
  compute_at and inline, softmax, conv2d, symbolic shapes), each with a CPU
  schedule and a bound one (blocks and threads);
* ``test_threads``: programs whose threads share memory through barriers (a
  shared-memory tiled matmul, a shared-memory reversal) run on kinds with GPU
  thread semantics and are refused, naming barriers, on serial ones;
* ``test_random_schedules``: random loop primitives and placements (hypothesis;
  ``LOOM_E2E_EXAMPLES`` sets the number of examples);
* ``test_random_programs``: random integer programs from
  :mod:`loom.testing.random_programs`, compared exactly with the interpreter;
* ``test_bad_arguments``: every bad call raises a LoomError and writes
  nothing (in a child process, so a crash is a failure);
* ``test_aliasing``: the same array as input and output (or overlapping
  views), and a read-only array where the function writes, are refused with
  the same error on every kind, after a good call too; arrays only read may alias;
* ``test_export``: ``export_library`` then ``loom.runtime.load_module`` in a
  fresh process gives the same results;
* ``test_intrinsics``: every elementwise intrinsic for float32/float64 (and
  ints where it applies) on zeros, negatives, large values, infinities and NaN;
* ``test_integers``: wrap-around of integer arithmetic, truncating and floor
  division and modulo with negative operands (``INT_MIN // -1`` wraps);
* ``test_arith_safety``: a zero divisor in the data raises
  :class:`loom.testing.DivisionByZero` and ``INT_MIN // -1`` wraps, for every
  integer dtype and in scalar, vector, parallel and bound loops (in a child
  process: a trap is a failure); a guarded division does not fail;
* ``test_allocation_safety``: a stage whose extent a scalar argument decides
  raises a LoomError naming the buffer, as the interpreter does, for a negative
  extent (also one that wraps, or two whose product is positive) and a size that
  overflows 64 bits, rather than allocating a few bytes (in a child process);
* ``test_function_names``: functions named like C library functions, OpenMP
  entry points, keywords or with non-ASCII names build, run, export and load;
* ``test_jit``: ``@loom.jit`` kernels (an elementwise one, a reduction sized by
  a static ``BLOCK`` parameter, a ``T.dyn`` size shared with the shapes, int32
  and int64) compiled for the kind and for the interpreter give the same results.

A device kind (device type other than the CPU) builds split programs with a
host (``--loom-host``), takes arrays on its device, and gets every loop bound
to ``blockIdx``/``threadIdx``.  See :mod:`loom.testing.conformance.plugin` for
the fixtures, and docs/backend-authors.md, section 9.
"""
