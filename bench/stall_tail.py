#!/usr/bin/env python3
"""A stalled member's users: how long until each is served elsewhere (issue 23, 9).

Starts 3 members on 127.0.0.1 sharing one deposit, failure_timeout_ms=2000,
creates guests (POST /api/counter/incr), finds those living on the member to
stall (GET /api/whoami), hammers them through the fronts of the other members
(GET /api/counter, one cookie per user, short client timeouts), SIGSTOPs the
member and measures, per user, the time from SIGSTOP to his first 200.

usage: stall_tail.py [--stall n3|n1|n2] [--users 60] [--client-timeout 10] [--warm 0]
                [--make-fronts n1,n2] [--method GET|POST] [--mode split|alternate]
                [--debug] [--out DIR] [--extra KEY=VAL ...]
Users are made through the fronts of the two other members; half of the
stalled member's users are then hammered through the front they were made on
(route cached), half through the other (no route: the first request is a
resolve, through the commander). Hammering starts at the SIGSTOP (--warm 0).
Goal: every user served within failure_timeout_ms + 1 s (3 s here).
Seen on d1d9c63: cached routes ~2.0 s, uncached ~5.05 s (= limits.hold_seconds:
the commander had handed the resolve to the stalled member's worker, and
nothing failed it at the down verdict). Since issue 23: p99 2.07 s (n3),
2.20 s (n1, the commander's member). TROUPE=path selects the binary
(default build/bin/troupe).
Every request is logged to DIR/requests.csv; members' logs to DIR/nX.log.
"""
import argparse, csv, http.client, os, re, shutil, signal, statistics, subprocess, sys, threading, time, json

BIN = os.environ.get("TROUPE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin", "troupe"))
TOKEN = "stall-repro-token"

ap = argparse.ArgumentParser()
ap.add_argument("--stall", default="n3")
ap.add_argument("--users", type=int, default=60)
ap.add_argument("--client-timeout", type=float, default=10.0)
ap.add_argument("--mode", default="split", choices=["split", "alternate"])
ap.add_argument("--pace", type=float, default=0.05, help="sleep between a user's requests (s)")
ap.add_argument("--debug", action="store_true")
ap.add_argument("--out", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "troupe-stall-tail"))
ap.add_argument("--extra", nargs="*", default=[])
ap.add_argument("--warm", type=float, default=0.0, help="seconds of hammering before SIGSTOP (0: start right after it)")
ap.add_argument("--make-fronts", default="", help="fronts the users are created through, in turn")
ap.add_argument("--method", default="GET", choices=["GET", "POST"], help="GET /api/counter or POST /api/counter/incr")
ap.add_argument("--run-for", type=float, default=15.0, help="seconds after SIGSTOP")
args = ap.parse_args()

out = args.out
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out + "/deposit")
procs = {}
http_port = {}
cluster_addr = {}


def start(name, join=None):
    argv = [BIN, "node", "--listen", "127.0.0.1:0", "--deposit", out + "/deposit", "--admin-token", TOKEN,
            "--set", "node.name=" + name, "--set", "cluster.listen=127.0.0.1:0",
            "--set", "cluster.failure_timeout_ms=2000"]
    if args.debug:
        argv += ["--set", "node.log_level=debug"]
    for e in args.extra:
        argv += ["--set", e]
    if join:
        argv += ["--join", join]
    so = open(f"{out}/{name}.out", "w")
    se = open(f"{out}/{name}.log", "w")
    p = subprocess.Popen(argv, stdout=so, stderr=se)
    procs[name] = p
    deadline = time.time() + 10
    while time.time() < deadline:
        o = open(f"{out}/{name}.out").read()
        l = open(f"{out}/{name}.log").read()
        m1 = re.search(r"listening on http://127\.0\.0\.1:(\d+)", o)
        m2 = re.search(r"cluster: member %s of \S+ at (\S+:\d+)" % name, l)
        if m1 and m2:
            http_port[name] = int(m1.group(1))
            cluster_addr[name] = m2.group(1)
            return
        if p.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(f"{name} did not start:\n" + open(f"{out}/{name}.log").read())


def req(port, method, path, cookie=None, timeout=2.0, token=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {}
    if cookie:
        h["Cookie"] = "troupe_cid=" + cookie
    if token:
        h["Authorization"] = "Bearer " + TOKEN
    try:
        c.request(method, path, headers=h)
        r = c.getresponse()
        body = r.read()
        sc = r.getheader("Set-Cookie") or ""
        m = re.search(r"troupe_cid=([^;]+)", sc)
        return r.status, body, (m.group(1) if m else None), r.getheader("Retry-After")
    finally:
        c.close()


def metrics(name):
    try:
        s, b, _, _ = req(http_port[name], "GET", "/_troupe/metrics", token=True, timeout=3)
        return b.decode()
    except Exception as e:
        return f"# error {e}"


def pick(text, *names):
    return [l for l in text.splitlines() if any(l.startswith(n) for n in names)]


try:
    start("n1")
    start("n2", cluster_addr["n1"])
    start("n3", cluster_addr["n1"])
    time.sleep(1.0)
    names = ["n1", "n2", "n3"]
    fronts = [n for n in names if n != args.stall]
    print("members:", {n: (http_port[n], cluster_addr[n], procs[n].pid) for n in names}, flush=True)

    # Guests, created through every front in turn.
    users = []
    for i in range(args.users):
        mk = args.make_fronts.split(",") if args.make_fronts else [n for n in names if n != args.stall]
        f = mk[i % len(mk)]
        s, b, cid, _ = req(http_port[f], "POST", "/api/counter/incr")
        assert s == 200 and cid, (s, b)
        s, b, _, _ = req(http_port[f], "GET", "/api/whoami", cookie=cid)
        who = json.loads(b)
        users.append({"cid": cid, "node": who["node"], "worker": who.get("worker"), "made_on": f})
    victims = [u for u in users if u["node"] == args.stall]
    for i, u in enumerate(victims):  # does the front that hammers him have his route (made there)?
        # split mode: every other user is hammered through the front he was made on (its route cache
        # knows him), the others through the other front (no route there: a resolve first)
        if u["made_on"] in fronts:
            other = [f for f in fronts if f != u["made_on"]][0]
            u["front"] = u["made_on"] if (i // 2) % 2 == 0 else other
        else:
            u["front"] = fronts[i % len(fronts)]
        u["warm_route"] = u["made_on"] == u["front"]
    print(f"{len(users)} users; on {args.stall}: {len(victims)}", flush=True)

    stop_evt = threading.Event()
    t_stop = [None]
    log = []
    log_lock = threading.Lock()
    first_ok = {}

    def hammer(idx, u):
        k = 0
        while not stop_evt.is_set():
            if args.mode == "split":
                f = u["front"]
            else:
                f = fronts[k % len(fronts)]
            k += 1
            t0 = time.monotonic()
            try:
                s, b, _, ra = req(http_port[f], args.method, "/api/counter" if args.method == "GET" else "/api/counter/incr",
                                 cookie=u["cid"], timeout=args.client_timeout)
                err = ""
            except Exception as e:
                s, b, ra, err = 0, b"", None, type(e).__name__
            t1 = time.monotonic()
            with log_lock:
                log.append((idx, f, t0, t1, s, ra, err, b[:80].decode(errors="replace")))
                # a 200 received >100 ms after SIGSTOP cannot come from the stalled member
                if s == 200 and t_stop[0] is not None and t1 > t_stop[0] + 0.1 and idx not in first_ok:
                    first_ok[idx] = (t1 - t_stop[0], t0 - t_stop[0], f)
            if s != 200:
                time.sleep(0.02)
            else:
                time.sleep(args.pace)

    threads = [threading.Thread(target=hammer, args=(i, u), daemon=True) for i, u in enumerate(victims)]
    if args.warm > 0:
        for t in threads:
            t.start()
        time.sleep(args.warm)  # warm: every front has a route to every victim
    m_before = {n: metrics(n) for n in fronts}
    os.kill(procs[args.stall].pid, signal.SIGSTOP)
    t_stop[0] = time.monotonic()
    if args.warm <= 0:
        for t in threads:
            t.start()
    wall_stop = time.time()
    print(f"SIGSTOP {args.stall} at {time.strftime('%H:%M:%S', time.gmtime(wall_stop))}.{int(wall_stop*1000)%1000:03d}Z",
          flush=True)
    while time.monotonic() - t_stop[0] < args.run_for and len(first_ok) < len(victims):
        time.sleep(0.1)
    time.sleep(0.5)
    m_after = {n: metrics(n) for n in fronts}
    stop_evt.set()
    for t in threads:
        t.join(timeout=args.client_timeout + 1)

    ts = sorted(v[0] for v in first_ok.values())
    missing = len(victims) - len(ts)
    if ts:
        q = lambda p: ts[min(len(ts) - 1, int(round(p * (len(ts) - 1))))]
        print(f"users on {args.stall}: {len(victims)}; served elsewhere: {len(ts)}; never within {args.run_for}s: {missing}")
        print(f"SIGSTOP -> first 200: p50 {statistics.median(ts):.3f}s  p90 {q(0.9):.3f}s  p99 {q(0.99):.3f}s  max {ts[-1]:.3f}s")
        print("sorted:", " ".join(f"{x:.2f}" for x in ts))
    if args.mode == "split":
        for warm in (True, False):
            xs = sorted(first_ok[i][0] for i, u in enumerate(victims) if u["warm_route"] == warm and i in first_ok)
            if xs:
                print(f"  route {'cached' if warm else 'not cached'} at the hammering front before SIGSTOP"
                      f"{' (or warmed)' if args.warm > 0 else ''}: {len(xs)} users, p50 {statistics.median(xs):.3f}s max {xs[-1]:.3f}s")
    for idx in sorted(first_ok, key=lambda i: first_ok[i][0])[-5:]:
        tt, sent, f = first_ok[idx]
        print(f"  slowest user #{idx} (made on {victims[idx]['made_on']}, hammered via {victims[idx]['front']} in split mode): 200 at {tt:.3f}s, that request sent at {sent:.3f}s via {f}")
    with open(out + "/requests.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["user", "front", "t_send", "t_recv", "status", "retry_after", "client_error", "body"])
        for (idx, f, t0, t1, s, ra, err, b) in log:
            w.writerow([idx, f, f"{t0 - t_stop[0]:.3f}", f"{t1 - t_stop[0]:.3f}", s, ra, err, b])
    json.dump({"victims": victims, "first_ok": first_ok, "wall_stop": wall_stop}, open(out + "/summary.json", "w"))
    for n in fronts:
        interesting = ("troupe_forwarded", "troupe_cluster_members", "troupe_node_failovers")
        print(f"metrics {n} before:", *pick(m_before[n], *interesting), sep="\n  ")
        print(f"metrics {n} after:", *pick(m_after[n], *interesting), sep="\n  ")
finally:
    for n, p in procs.items():
        try:
            os.kill(p.pid, signal.SIGCONT)
        except Exception:
            pass
    time.sleep(0.3)
    for n, p in procs.items():
        try:
            p.kill()
            p.wait(timeout=5)
        except Exception:
            pass
