#!/usr/bin/env bash
# PostgreSQL 15 with pgvector, for tests/test_pg15.py: Debian's postgresql-15 and
# postgresql-server-dev-15, and pgvector built from Debian's source package (bookworm ships no
# postgresql-15-pgvector; the source of a newer suite builds against 15). Idempotent: does
# nothing when pgvector >= 0.5 is already installed for 15. Never fails hard: on a machine
# without apt-get (not Debian) or without network, it says why and exits 0, and the PG15 tests
# skip with that reason.
set -uo pipefail

PGBIN=/usr/lib/postgresql/15/bin
PG_CONFIG=$PGBIN/pg_config
SUITES="${PGEVAL_PGVECTOR_SUITES:-trixie bookworm-backports}"
WORK="${PGEVAL_PG15_WORK:-/tmp/pgeval-pg15-build}"

say() { echo "pg15.sh: $*"; }
skip() { say "$*: the PostgreSQL 15 tests will be skipped"; exit 0; }

installed_version() {
    local ctl
    ctl="$("$PG_CONFIG" --sharedir 2>/dev/null)/extension/vector.control"
    [ -f "$ctl" ] && sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$ctl"
}

new_enough() {  # pgvector >= 0.5 (HNSW)
    local v="$1"
    [ -n "$v" ] && printf '0.5.0\n%s\n' "$v" | sort -V -C
}

command -v apt-get >/dev/null 2>&1 || skip "apt-get not found (not a Debian system)"
[ "$(id -u)" = 0 ] || skip "not root (cannot install Debian packages)"

if [ -x "$PGBIN/postgres" ] && [ -x "$PG_CONFIG" ] && new_enough "$(installed_version)" \
        && [ -f "$("$PG_CONFIG" --pkglibdir)/vector.so" ]; then
    say "PostgreSQL 15 with pgvector $(installed_version) already installed"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
APT_LOCK=(-o DPkg::Lock::Timeout=300)
pgxs() {  # the server headers and PGXS (postgresql-server-dev-15)
    [ -x "$PG_CONFIG" ] && [ -f "$("$PG_CONFIG" --pgxs 2>/dev/null)" ] \
        && [ -f "$("$PG_CONFIG" --includedir-server 2>/dev/null)/postgres.h" ]
}
if [ ! -x "$PGBIN/postgres" ] || ! pgxs; then
    # only what is missing (installed packages are not upgraded); the package index is
    # refreshed only when the install fails without it
    pkgs=()
    for p in postgresql-15 postgresql-server-dev-15 make gcc dpkg-dev; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || pkgs+=("$p")
    done
    say "installing ${pkgs[*]}"
    apt_install() { apt-get install -y -qq --no-install-recommends --no-upgrade "${APT_LOCK[@]}" \
                    "${pkgs[@]}" >/dev/null; }
    apt_install || { apt-get update -qq "${APT_LOCK[@]}" && apt_install; } \
        || skip "could not install ${pkgs[*]}"
    pgxs || skip "postgresql-server-dev-15 installed no server headers"
fi

# pgvector's Debian source package, from a private apt configuration (the system's sources are
# not touched): deb-src lines for newer suites
rm -rf "$WORK" && mkdir -p "$WORK/lists/partial" "$WORK/parts" "$WORK/src" || skip "cannot write $WORK"
: > "$WORK/empty.list"
cat > "$WORK/parts/pgvector-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $SUITES
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
APT_PRIVATE=(-o Dir::Etc::SourceList="$WORK/empty.list" -o Dir::Etc::SourceParts="$WORK/parts"
             -o Dir::State::Lists="$WORK/lists")
apt-get -qq "${APT_PRIVATE[@]}" update >/dev/null 2>&1 \
    || skip "cannot read Debian's source index (no network?)"
say "fetching pgvector's source package ($(apt-cache "${APT_PRIVATE[@]}" showsrc pgvector \
    | sed -n 's/^Version: //p' | sort -V | tail -1))"
(cd "$WORK/src" && apt-get -qq "${APT_PRIVATE[@]}" source pgvector >/dev/null 2>&1) \
    || skip "apt-get source pgvector failed"
SRCDIR=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -1)
[ -n "$SRCDIR" ] || skip "the pgvector source package has no source directory"

say "building pgvector in $SRCDIR"
# OPTFLAGS="": no -march=native, so the library runs on any x86-64 the cluster moves to
if ! (cd "$SRCDIR" && make -s -j"$(nproc)" PG_CONFIG="$PG_CONFIG" OPTFLAGS="" with_llvm=no >/dev/null \
        && make -s install PG_CONFIG="$PG_CONFIG" with_llvm=no >/dev/null); then
    skip "building pgvector failed"
fi
v=$(installed_version)
new_enough "$v" || skip "pgvector $v installed, but 0.5 or newer (HNSW) is needed"
say "pgvector $v installed for PostgreSQL 15"
