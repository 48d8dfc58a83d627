#!/bin/sh
# RUSTC_WORKSPACE_WRAPPER for scripts/check/fuzz.sh: compiles the train crate and the fuzz test
# with LLVM coverage instrumentation, and every other crate of the workspace as usual.
rustc=$1
shift
case " $* " in
*" --crate-name train "* | *" --crate-name fuzz "*)
    exec "$rustc" "$@" -C instrument-coverage
    ;;
esac
exec "$rustc" "$@"
