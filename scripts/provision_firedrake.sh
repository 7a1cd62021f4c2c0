#!/usr/bin/env bash
# The recipe ships inside the package (pdebench provision firedrake runs it from a wheel too).
exec bash "$(dirname "$0")/../pytest_pdebench/libraries/provision_firedrake.sh" "$@"
