#!/usr/bin/env bash
# `ray up` / `ray submit` / `ray down` of launch/cluster.local.yaml against this machine, over SSH
# on loopback, as on-premises machines are used with Ray's `local` node provider:
#
#   launch/local_cluster.sh [rl-system train args...]    (default: a short CartPole run)
#
# Needs root and Debian's openssh-server and rsync (`apt-get install -y openssh-server rsync`; Ray
# copies its bootstrap config to the head with rsync). It starts its own sshd on 127.0.0.1:22 with
# a host key and a login key made on the fly, inside its own PID and mount namespaces: there
# `ray stop` (which `ray up` and `ray down` run on the head) sees only the cluster's processes, not
# other Ray instances on the machine, and the login shell puts this Python first on PATH. The
# cluster gets its own ports and temp dir. Everything is torn down at exit.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=$(command -v python)
BIN=$(dirname "$PY")
RAY="$BIN/ray"
WORK=$(mktemp -d /tmp/rl_system_local_cluster.XXXXXX)
SSHD_PID=""

say() { printf '\n== %s\n' "$*"; }
ssh_port_open() { "$PY" -c 'import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(("127.0.0.1", 22)) != 0)'; }
# k distinct free ports between Ray's worker ports (10002-19999 by default) and the kernel's
# ephemeral range: a port from inside the latter (what binding port 0 gives) can be taken by any
# outgoing connection in the minute before `ray start` binds it, and another Ray on the machine
# opens many (a GCS once failed to bind its port so).
free_ports() {
  "$PY" - "$1" <<'PYEOF'
import random, socket, sys
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = []
while len(ports) < int(sys.argv[1]):
    port = random.randrange(20000, low)
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            continue
    if port not in ports:
        ports.append(port)
print(*ports)
PYEOF
}

cleanup() {
  if [ -n "$SSHD_PID" ]; then
    # unshare hands SIGKILL to sshd, the namespace's init: everything started in it goes too.
    kill -KILL "$SSHD_PID" 2>/dev/null || true  # it blocks SIGTERM while it waits
    wait "$SSHD_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "local_cluster.sh: run as root (it starts sshd and namespaces)" >&2; exit 2; }
for tool in /usr/sbin/sshd rsync unshare ssh-keygen; do
  command -v "$tool" >/dev/null || { echo "local_cluster.sh: $tool missing: apt-get install -y openssh-server rsync" >&2; exit 2; }
done
if ssh_port_open; then
  echo "local_cluster.sh: 127.0.0.1:22 is taken (another sshd?); Ray's SSH runner always uses port 22" >&2; exit 2
fi

say "sshd on 127.0.0.1:22 in its own PID and mount namespaces (keys made now, in $WORK)"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$WORK/id_ed25519"
cat > "$WORK/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port 22
HostKey $WORK/host_key
AuthorizedKeysFile $WORK/id_ed25519.pub
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $WORK/sshd.pid
CONF
# The login shell of the cluster's commands (Ray runs them with bash --login -i, which sources
# ~/.bashrc): this Python first, and the checkout for launch/train.py's config lookup.
# The raylet gives its dashboard agent 30 s to come up by default, too little on a small busy machine.
cat > "$WORK/bashrc" <<RC
export PATH="$BIN:\$PATH"
export RL_SYSTEM_HOME="$REPO"
export RAY_agent_register_timeout_ms=180000
RC
mkdir -p /run/sshd
touch /root/.bashrc
unshare --pid --fork --kill-child --mount-proc --mount bash -c \
  "mount --bind '$WORK/bashrc' /root/.bashrc && exec /usr/sbin/sshd -D -e -f '$WORK/sshd_config'" \
  2> "$WORK/sshd.log" &
SSHD_PID=$!
for _ in $(seq 50); do
  ssh_port_open && break
  sleep 0.2
done

# The cluster's auth token (what `ray get-auth-token --generate` makes), copied to the head by `ray up`.
"$PY" -c 'import secrets; print(secrets.token_hex(32))' > "$WORK/auth_token"
read -r GCS DASH CLIENT AGENT <<< "$(free_ports 4)"
sed -e "s#__SSH_KEY__#$WORK/id_ed25519#" -e "s#__TOKEN_FILE__#$WORK/auth_token#" -e "s#__GCS_PORT__#$GCS#g" -e "s#__DASHBOARD_PORT__#$DASH#" \
    -e "s#__CLIENT_PORT__#$CLIENT#" -e "s#__AGENT_PORT__#$AGENT#" -e "s#__TEMP_DIR__#$WORK/ray#" \
    "$REPO/launch/cluster.local.yaml" > "$WORK/cluster.yaml"

say "ray up $WORK/cluster.yaml"
"$RAY" up -y --no-config-cache "$WORK/cluster.yaml"

say "ray exec: the cluster's resources (with the token), then a request without it"
"$RAY" exec "$WORK/cluster.yaml" "ray status --address 127.0.0.1:$GCS"
if RAY_AUTH_MODE=token RAY_AUTH_TOKEN=wrong "$RAY" status --address "127.0.0.1:$GCS" > "$WORK/no_token.log" 2>&1; then
  echo "local_cluster.sh: the cluster answered a request with a wrong token" >&2; exit 1
fi
tail -n 1 "$WORK/no_token.log"

if [ $# -eq 0 ]; then
  set -- launch/configs/cartpole_ppo.yaml --set max_env_steps=200000 --set target_return=null
fi
say "ray submit $WORK/cluster.yaml launch/train.py -- $* --address 127.0.0.1:$GCS --run-dir $WORK/run"
status=0
"$RAY" submit "$WORK/cluster.yaml" "$REPO/launch/train.py" -- "$@" --address "127.0.0.1:$GCS" \
  --run-dir "$WORK/run" || status=$?
if [ -f "$WORK/run/summary.json" ]; then
  "$PY" - "$WORK/run/summary.json" <<'PY' || true
import json, sys
s = json.load(open(sys.argv[1]))
ret = s.get("final_mean_return")
print(f"summary.json: {s['status']}, {s['env_steps']:,} env steps in {s['wall_time_s']:.1f} s, "
      f"final mean return {'-' if ret is None else f'{ret:.1f}'}")
PY
fi

say "ray down $WORK/cluster.yaml"
"$RAY" down -y "$WORK/cluster.yaml"
exit "$status"
