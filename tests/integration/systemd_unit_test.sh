#!/usr/bin/env bash
# ctest install.systemd_unit: dist/troupe.service passes `systemd-analyze verify`
# (with ExecStart pointed at the built binary: verify checks that it exists) and
# keeps the hardening set docs/install.md documents. Exit 77 (ctest: skipped)
# where systemd-analyze is not installed.
#   systemd_unit_test.sh UNIT_FILE TROUPE_BIN
set -euo pipefail
unit=$1
bin=$2
fail() { echo "systemd_unit_test: FAIL: $*" >&2; exit 1; }
for want in 'ExecStart=/usr/bin/troupe node' NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
            PrivateDevices=yes DynamicUser=yes StateDirectory=troupe CapabilityBoundingSet= \
            'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX' SystemCallFilter=@system-service MemoryDenyWriteExecute=yes \
            Environment=TROUPE_DEPOSIT_PATH=/var/lib/troupe/deposit Environment=TROUPE_DEPOSIT_FALLBACK_PATH=/var/lib/troupe/rescue \
            RestartPreventExitStatus=2; do
  grep -qxF "$want" "$unit" || fail "$unit lacks the line $want"
done
if ! command -v systemd-analyze > /dev/null; then
  echo "systemd_unit_test: SKIP: systemd-analyze is not installed (Debian: systemd)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/troupe-unit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=/usr/bin/troupe |ExecStart=$bin |" "$unit" > "$tmp/troupe.service"
grep -q "^ExecStart=$bin node" "$tmp/troupe.service" || fail "ExecStart not rewritten"
rc=0
out=$(systemd-analyze verify "$tmp/troupe.service" 2>&1) || rc=$?
# Unknown keys are only warnings: any output is a failure too.
[ "$rc" -eq 0 ] && [ -z "$out" ] || fail "systemd-analyze verify (exit $rc): $out"
echo "systemd_unit_test: ok: systemd-analyze verify is silent"
