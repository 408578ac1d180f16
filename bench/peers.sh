# bench/peers.sh, sourced by the S1 scripts (s1_quick.sh, allocs.sh): once the minimal
# Beast server and troupe were started with their stdout in $tmp/beast.out and
# $tmp/troupe.out, waits for both to listen (10 s at most), sets beast_url and
# troupe_url, and writes 1,000 users' cookies to $tmp/cookies.txt (bench/cookies.sh).
for f in beast troupe; do
  for _ in $(seq 100); do grep -q listening "$tmp/$f.out" 2>/dev/null && break; sleep 0.1; done
done
beast_url=$(grep -o 'http://[0-9.:]*' "$tmp/beast.out")
troupe_url=$(grep -o 'http://[0-9.:]*' "$tmp/troupe.out")
bench/cookies.sh "$troupe_url" 1000 "$tmp/cookies.txt"
