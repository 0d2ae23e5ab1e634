# packages.sh: sourced by the shell tests that run Debian programs.
#
# ensure_packages ON_MISSING PKG...: installs the packages of the list that
# are not installed, when we are root.  When one is missing and cannot be
# installed, calls ON_MISSING with a message (the caller decides whether
# that fails the test or skips it); ON_MISSING must not return.

ensure_packages() {
    ep_missing=$1
    shift
    ep_need=
    for p in "$@"; do
        dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' ||
            ep_need="$ep_need $p"
    done
    [ -z "$ep_need" ] && return 0
    [ "$(id -u)" -eq 0 ] ||
        "$ep_missing" "missing Debian packages:$ep_need (not root, cannot install them)"
    echo "installing Debian packages:$ep_need"
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086 # a list of package names
    apt-get install -y -q --no-install-recommends $ep_need >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 &&
          apt-get install -y -q --no-install-recommends $ep_need >/dev/null 2>&1; } ||
        "$ep_missing" "could not install:$ep_need"
}
