#!/usr/bin/env bash
# Build the CPU grading image (default course-autograder:cpu) without any network inside the build:
#   1. a Debian 12 base with python3 and pip, made by debootstrap from the apt mirror and `docker import`ed
#      (course-base:bookworm; built once, kept);
#   2. the course's pinned runtime packages (containers/cpu/requirements.py over the .venv) as wheels,
#      fetched on the host with pip (its cache and the registries);
#   3. `docker build --network none` over those wheels and autograder/, coursedata/, datasets/.
# An image whose inputs (those files, the pins, the Dockerfile) have not changed is kept as it is.
# Needs: root or a docker group member, a running Docker engine, debootstrap (Debian/Ubuntu hosts).
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${IMAGE:-course-autograder:cpu}
BASE=${BASE:-course-base:bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PY=${PY:-.venv/bin/python}
CTX=build/cpu-image

die() { echo "error: $*" >&2; exit 2; }
command -v docker >/dev/null || die "no docker client (Debian: apt-get install docker.io)"
docker info >/dev/null 2>&1 || die "no Docker engine answers (start one: dockerd &)"
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || die "$PY is not Python 3.11, the image's (its wheels must be cp311)"

if ! docker image inspect "$BASE" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || die "no debootstrap to make $BASE (apt-get install debootstrap)"
    echo "[1/3] $BASE: debootstrap bookworm from $MIRROR"
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    debootstrap --variant=minbase --include=python3,python3-pip bookworm "$root" "$MIRROR" >/dev/null
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    tar -C "$root" -c . | docker import - "$BASE" >/dev/null
    rm -rf "$root"
    trap - EXIT
else
    echo "[1/3] $BASE: present"
fi

echo "[2/3] wheels of the course's pinned packages"
rm -rf "$CTX/course" && mkdir -p "$CTX/wheels" "$CTX/course"
"$PY" containers/cpu/requirements.py pyproject.toml > "$CTX/requirements.txt"
# Wheels of earlier pins are dropped so the context holds exactly the list.
"$PY" -m pip download -q --no-deps --only-binary=:all: -d "$CTX/wheels" -r "$CTX/requirements.txt" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
"$PY" - "$CTX" <<'PYEOF'
import sys, pathlib, re
ctx = pathlib.Path(sys.argv[1])
pins = {re.sub(r"[-_.]+", "-", l.split("==")[0]).lower(): l.split("==")[1]
        for l in (ctx / "requirements.txt").read_text().split()}
for wheel in (ctx / "wheels").glob("*.whl"):
    name, version = wheel.name.split("-")[:2]
    if pins.get(re.sub(r"[-_.]+", "-", name).lower()) != version.replace("_", "-") and \
            pins.get(re.sub(r"[-_.]+", "-", name).lower()) != version:
        wheel.unlink()
missing = set(pins) - {re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() for w in (ctx / "wheels").glob("*.whl")}
if missing:
    sys.exit(f"error: no wheel for {sorted(missing)}")
PYEOF
cp "$CTX/requirements.txt" "$CTX/wheels/requirements.txt"
cp -r autograder coursedata datasets "$CTX/course/"
find "$CTX/course" -name __pycache__ -prune -exec rm -rf {} + ; rm -rf "$CTX/course/datasets/.cache"
cp containers/cpu/Dockerfile "$CTX/Dockerfile"

inputs=$( (cd "$CTX" && find Dockerfile wheels/requirements.txt course -type f -print0 | sort -z | xargs -0 sha256sum) \
          | sha256sum | cut -c1-16)
if [ "$(docker image inspect -f '{{ index .Config.Labels "course.inputs" }}' "$IMAGE" 2>/dev/null)" = "$inputs" ]; then
    echo "[3/3] $IMAGE: up to date ($inputs)"
    exit 0
fi
echo "[3/3] $IMAGE: docker build --network none ($inputs)"
docker build -q --network none --build-arg BASE="$BASE" --label course.inputs="$inputs" -t "$IMAGE" "$CTX" >/dev/null
docker image prune -f >/dev/null  # the image this one replaced
echo "$IMAGE: built"
