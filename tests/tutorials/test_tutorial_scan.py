"""Tutorial "Scan and Recurrent Kernel": cumulative sum with bound threads, a two-stage cell, two states."""

import numpy as np

import loom


def test_cumulative_sum_with_thread_bound_stages():
    m, n = loom.var("m"), loom.var("n")
    X = loom.placeholder((m, n), name="X")
    s_state = loom.placeholder((m, n))
    s_init = loom.compute((1, n), lambda _, i: X[0, i])
    s_update = loom.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = loom.scan(s_init, s_update, s_state, inputs=[X])
    s = loom.create_schedule(s_scan.op)
    num_thread = 256
    block_x, thread_x = loom.thread_axis("blockIdx.x"), loom.thread_axis("threadIdx.x")
    xo, xi = s[s_init].split(s_init.op.axis[1], factor=num_thread)
    s[s_init].bind(xo, block_x)
    s[s_init].bind(xi, thread_x)
    xo, xi = s[s_update].split(s_update.op.axis[1], factor=num_thread)
    s[s_update].bind(xo, block_x)
    s[s_update].bind(xi, thread_x)
    print(loom.lower(s, [X, s_scan], simple_mode=True))
    fscan = loom.build(s, [X, s_scan], "llvm", name="myscan")
    ctx = loom.cpu(0)
    a_np = np.random.uniform(size=(10, 300)).astype(s_scan.dtype)
    a = loom.nd.array(a_np, ctx)
    b = loom.nd.array(np.zeros((10, 300), dtype=s_scan.dtype), ctx)
    fscan(a, b)
    loom.testing.assert_allclose(b.asnumpy(), np.cumsum(a_np, axis=0), rtol=1e-5)


def test_a_two_stage_scan_cell():
    m, n = loom.var("m"), loom.var("n")
    X = loom.placeholder((m, n), name="X")
    s_state = loom.placeholder((m, n))
    s_init = loom.compute((1, n), lambda _, i: X[0, i])
    s_update_s1 = loom.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s_update_s2 = loom.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
    s_scan = loom.scan(s_init, s_update_s2, s_state, inputs=[X])
    s = loom.create_schedule(s_scan.op)
    xo, xi = s[s_update_s2].split(s_update_s2.op.axis[1], factor=32)
    s[s_update_s1].compute_at(s[s_update_s2], xo)
    f = loom.build(s, [X, s_scan], "llvm")
    x = np.random.uniform(size=(6, 70)).astype("float32")
    out = np.zeros_like(x)
    f(x, out)
    want = x.copy()
    for t in range(1, 6):
        want[t] = want[t - 1] * 2 + x[t]
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_two_states():
    m, n, l = loom.var("m"), loom.var("n"), loom.var("l")
    X = loom.placeholder((m, n), name="X")
    s_state1 = loom.placeholder((m, n))
    s_state2 = loom.placeholder((m, l))
    s_init1 = loom.compute((1, n), lambda _, i: X[0, i])
    s_init2 = loom.compute((1, l), lambda _, i: 0.0)
    s_update1 = loom.compute((m, n), lambda t, i: s_state1[t - 1, i] + X[t, i])
    s_update2 = loom.compute((m, l), lambda t, i: s_state2[t - 1, i] + s_state1[t - 1, 0])
    s_scan1, s_scan2 = loom.scan([s_init1, s_init2], [s_update1, s_update2], [s_state1, s_state2], inputs=[X])
    s = loom.create_schedule(s_scan1.op)
    f = loom.build(s, [X, s_scan1, s_scan2], "llvm")
    x = np.random.uniform(size=(5, 4)).astype("float32")
    o1, o2 = np.zeros((5, 4), "float32"), np.zeros((5, 3), "float32")
    f(x, o1, o2)
    want1 = np.cumsum(x, axis=0)
    want2 = np.zeros((5, 3), "float32")
    for t in range(1, 5):
        want2[t] = want2[t - 1] + want1[t - 1, 0]
    np.testing.assert_allclose(o1, want1, rtol=1e-5)
    np.testing.assert_allclose(o2, want2, rtol=1e-5)
