"""Tile-level model of one item of the fused forward with a sweep warp
(fused_forward.cuh, SPLIT), C slabs, n tiles a slab, with and without
"help along the ramps" (bench/lab/cluster_help.patch): what fraction of the
forward the front / back jobs could save. Costs are kilo-cycles a tile of
64 frames, from the labs of sessions 26 and 32 (contended: products and
sweep on one multiprocessor at once; alone: either one by itself); the
alone costs are guesses. A slab's iteration t sweeps tile t while its
compute warps make tile t + 1 (unless a helper does), then a barrier; a
sweep waits for its cells and for the slab before's sweep of the same tile.
    python3 bench/lab/help_ramp_model.py
"""
P_PROD, P_SWEEP = 20.7, 14.3  # contended (20.7 makes a tile ~21.5k, the kernel's period)
A_PROD, W_SWEEP = 18.0, 9.0   # alone (guesses)
BAR, RING, HAND, SWAP = 0.8, 1.0, 1.0, 1.5


def run(C, n, jobs, spt=2):
    """jobs: helper h -> [(j, t), ...] (abs-tile order); spt: tiles between
    two slabs' first frames (2 for 128-token slabs, 1 for 64: session 34's
    T=150 loss came from the model's fixed 2). End of the last sweep."""
    helped = {(j, t) for js in jobs.values() for (j, t) in js}
    sweep_end, ready, comp_ready = {}, {}, {}
    it_end = {j: 0.0 for j in range(C)}
    free = {h: 0.0 for h in range(C)}
    pending = {h: list(js) for h, js in jobs.items()}

    def jobs_upto(h, F):
        while pending.get(h) and spt * pending[h][0][0] + pending[h][0][1] <= F:
            j, t = pending[h][0]
            start = free[h]
            if spt * j + t > spt * h + n - 1:  # a back job: after h's own end
                if (h, n - 1) not in sweep_end:
                    return
                start = max(start, sweep_end[(h, n - 1)])
            pending[h].pop(0)
            done = max(start + SWAP + A_PROD, sweep_end.get((j, t - 2), 0.0) if t >= 2 else 0.0)
            ready[(j, t)] = free[h] = done + HAND

    for F, j, t in sorted((spt * j + t, j, t) for j in range(C) for t in range(n)):
        for h in range(C):
            jobs_upto(h, F)
        if t == 0:
            start = free[j] + (SWAP if jobs.get(j) else 0.0)
            comp_ready[(j, 0)] = start + A_PROD
            it_end[j] = comp_ready[(j, 0)] + BAR
        cells = ready[(j, t)] if (j, t) in helped else comp_ready[(j, t)]
        ring = sweep_end[(j - 1, t + spt)] + RING if j > 0 and t + spt < n else 0.0
        start = it_end[j]
        comp_next = t + 1 < n and (j, t + 1) not in helped
        s1 = max(start, cells, ring) + (P_SWEEP if comp_next else W_SWEEP)
        sweep_end[(j, t)] = s1
        c1 = start + (P_PROD if comp_next else 0.0)
        if comp_next:
            comp_ready[(j, t + 1)] = c1
        it_end[j] = max(s1, c1) + BAR
    return sweep_end[(C - 1, n - 1)]


def rule(C, n, front, back, spt=2):
    """the patch's helper_of at full lengths: slab j + 1 makes tiles 1..front
    of slab j, slab j - 1 the last `back` tiles of slab j"""
    js = {h: [] for h in range(C)}
    for h in range(1, C):
        js[h] += [(h - 1, t) for t in range(1, front + 1)]
    for h in range(C - 1):
        js[h] += [(h + 1, t) for t in range(n - back, n)]
    for h in js:
        js[h].sort(key=lambda jt: spt * jt[0] + jt[1])
    return js


if __name__ == "__main__":
    for w in (9.0, 12.0):
        W_SWEEP = w
        for C, n, what in ((4, 26, "B=32 T=512 S=2048"), (8, 58, "B=16 T=1024 S=4096")):
            b = run(C, n, {})
            cells = [f"{f}/{k}: {100 * (b - run(C, n, rule(C, n, f, k))) / b:.1f}%"
                     for f, k in ((1, 0), (3, 0), (2, 2), (3, 3))]
            print(f"{what}, sweep alone {w}k: forward {b:.0f}k cycles;", ", ".join(cells))
