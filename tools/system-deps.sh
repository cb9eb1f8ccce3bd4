#!/usr/bin/env bash
# OS packages the tests and `make run` use, from Debian's archive (run by `make system-deps`):
#   prometheus (promtool, and the server for the observability tests)  main
#   iproute2   (network namespaces for the netperf end-to-end runner)   main
#   netperf    (netperf/netserver: direct runs the operator's results are compared with) non-free
#   containerd, runc, containernetworking-plugins, iptables, conntrack, socat
#              (the local cluster's real worker node: kubelet's runtime, CNI, kube-proxy) main
#   buildah, debootstrap, busybox-static
#              (`make images` without a Docker engine; locally made base layers)  main
#   skopeo     (pushes the built images to the local registry, digests preserved)  main
#   lua5.1     (runs the Argo CD health checks of docs/health-checks.md)  main
#   stress-ng  (the CPU hog of `make test-loaded`: the suite must pass on a busy machine)  main
# Debian ships netperf only in non-free, so that component is added for this one package when
# the machine's sources lack it.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
command -v promtool >/dev/null || missing+=(prometheus)
command -v ip >/dev/null || missing+=(iproute2)
command -v netperf >/dev/null || missing+=(netperf)
command -v containerd >/dev/null || missing+=(containerd)
command -v runc >/dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
command -v socat >/dev/null || missing+=(socat)
command -v buildah >/dev/null || missing+=(buildah)
command -v skopeo >/dev/null || missing+=(skopeo)
command -v debootstrap >/dev/null || missing+=(debootstrap)
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)
command -v lua5.1 >/dev/null || missing+=(lua5.1)
command -v stress-ng >/dev/null || missing+=(stress-ng)
[ ${#missing[@]} -eq 0 ] && exit 0

start=$(date +%s)
if [[ " ${missing[*]} " == *" netperf "* ]] && ! grep -rqsE '^(Components:|deb ).*non-free( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  . /etc/os-release
  echo "==> adding Debian's non-free component for netperf (${VERSION_CODENAME})"
  $SUDO tee /etc/apt/sources.list.d/k8s-operators-py-non-free.sources >/dev/null <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: ${VERSION_CODENAME} ${VERSION_CODENAME}-updates
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
fi
echo "==> apt-get install ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "==> system packages ready in $(( $(date +%s) - start ))s"
