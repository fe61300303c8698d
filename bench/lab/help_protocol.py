"""Deadlock check of the cluster help's hand-overs (bench/lab/cluster_help.patch:
fused_forward.cuh's helper_of), tile level, for random item shapes: each
slab block a list of steps (its front jobs, its sweeps, its back jobs), each
step waiting on its condition (a job on the helped slab's sweep of the tile
two before; a sweep on its cells, on the slab before's sweep of its frames
and on the ring's room, the consumer's released frames + 224); progress
until done or stuck. Prints the stuck cases (none expected).
    python3 bench/lab/help_protocol.py [SEED] [CSIZE]
CSIZE 2: help only within pairs of slabs (2k, 2k + 1), the patch's
MAS_FUSED_HELP_PAIRS=1 (session 35); default: an item's slabs one cluster."""
import random, sys

FG, RING = 64, 256

def setup(T, S, X, Y, TOK, front, back):
    width = Y - X
    def f_last_of(bj): return min(Y - 1, min(bj + TOK - 1, X - 1) + width)
    def tiles_of(j):
        bj = j * TOK
        return 0 if bj >= X else (f_last_of(bj) - bj) // FG + 1
    def helper_of(j, t):
        if t < 1 or t >= tiles_of(j): return -1
        bj = j * TOK
        if t <= front and tiles_of(j + 1) > 0 and (j + 1) % CSIZE != 0: return j + 1
        if j >= 1 and j % CSIZE != 0 and t >= tiles_of(j) - back and f_last_of(bj - TOK) <= bj + t * FG + 192: return j - 1
        return -1
    return f_last_of, tiles_of, helper_of

def run(T, S, X, Y, TOK, front, back):
    f_last_of, tiles_of, helper_of = setup(T, S, X, Y, TOK, front, back)
    C = (T + TOK - 1) // TOK
    act = [j for j in range(C) if tiles_of(j) > 0]
    swept = {j: -1 for j in act}       # last tile swept
    made = set()                        # (j, t) cells ready (helped)
    released = {j: -1 for j in act}     # frames read by j (its ring progress), last frame
    empty_arr = set()                   # (j, t): slab j arrived for tile t (buffer of t-2 free)
    progs = {}
    for j in act:
        steps = []
        if j >= 1:
            for t in range(1, front + 1):
                if helper_of(j - 1, t) == j: steps.append(('job', j - 1, t))
        for ti in range(tiles_of(j)):
            steps.append(('sweep', j, ti))
        n1 = tiles_of(j + 1)
        for t in range(max(1, n1 - back), n1):
            if helper_of(j + 1, t) == j: steps.append(('job', j + 1, t))
        progs[j] = steps
    pc = {j: 0 for j in act}
    def ready(step):
        kind, j, t = step
        if kind == 'job':
            return t < 2 or (j, t) in empty_arr
        # sweep tile t of slab j
        bj = j * TOK
        f0 = bj + t * FG
        fl = min(f0 + FG - 1, f_last_of(bj))
        if helper_of(j, t) >= 0 and (j, t) not in made: return False
        if j >= 1:  # ring: slab j-1 swept up to frame fl - 1 (or its band's end)
            pj = j - 1
            need = min(fl - 1, f_last_of(pj * TOK))
            have = pj * TOK + (swept[pj] + 1) * FG - 1
            if swept[pj] + 1 >= tiles_of(pj): have = 10**9
            if have < need: return False
        if j + 1 in act:  # back-pressure: consumer j+1 released >= frames - 224
            cons = j + 1
            out_first = bj + TOK - 1
            need = fl - (RING - 32) + 1 - 32
            if need > out_first and released[cons] < need - 1: return False
        return True
    def do(step):
        kind, j, t = step
        if kind == 'job':
            made.add((j, t))
        else:
            swept[j] = t
            bj = j * TOK
            released[j] = min(bj + (t + 1) * FG - 1, f_last_of(bj))
            if helper_of(j, t + 2) >= 0: empty_arr.add((j, t + 2))
    while True:
        moved = False
        for j in act:
            while pc[j] < len(progs[j]) and ready(progs[j][pc[j]]):
                do(progs[j][pc[j]]); pc[j] += 1; moved = True
        if all(pc[j] == len(progs[j]) for j in act): return True, None
        if not moved:
            return False, {j: progs[j][pc[j]] if pc[j] < len(progs[j]) else 'done' for j in act}

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 1
CSIZE = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
rng = random.Random(seed)
print("seed", seed)
bad = 0
for it in range(20000):
    TOK = rng.choice([64, 128])
    T = rng.randint(1, 8 * TOK)
    S = rng.randint(T, 4 * T + 64)
    X = rng.randint(1, T); Y = rng.randint(X, S)
    front, back = rng.randint(0, 3), rng.randint(0, 3)
    ok, where = run(T, S, X, Y, TOK, front, back)
    if not ok:
        bad += 1
        if bad < 10: print("STUCK", dict(T=T, S=S, X=X, Y=Y, TOK=TOK, front=front, back=back), where)
for T, S in [(150, 800), (512, 2048), (1024, 4096)]:
    TOK = 64 if T == 150 else 128
    print(T, S, run(T, S, T, S, TOK, 3, 3)[0])
print("stuck:", bad)
