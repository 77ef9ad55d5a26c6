#!/usr/bin/env bash
# The Jupyter side of CI (issue 9), called by .ci/run after the README's test command:
#   - /tmp/ci-ipk7: a fresh virtualenv with exactly binder/requirements.txt (ipykernel 7)
#     plus the [test] tools; /tmp/ci-ipk6: ".[test,lab]" with "ipykernel<7" (the other
#     pins as binder's, so that both share Numba's cache);
#   - in each: every notebook through nbval (headless, MPLBACKEND unset) and the browser
#     test (tests/browser: JupyterLab in Debian's chromium), ipykernel 7 with
#     commsOverSubshells on and off, ipykernel 6 once (subshells on, the default) when the
#     time budget allows; the widget tests under ipykernel 6 (the README's test command
#     ran them under ipykernel 7 already);
#   - repo2docker --no-build: binder/ would be picked up as intended.
# Prints one "timing:" line per step; screenshots etc. go to $ARTEFACTS.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export ARTEFACTS="${ARTEFACTS:-/tmp/aare_lab_browser_artefacts}"
rm -rf "${ARTEFACTS}" && mkdir -p "${ARTEFACTS}"
CI_T0="${CI_T0:-$(date +%s)}"           # .ci/run's start, for the 25-minute budget
BUDGET_S="${AARE_LAB_CI_BUDGET_S:-1500}"
unset AARE_LAB_SKIP_BROWSER
export AARE_LAB_REQUIRE_BROWSER=1 PIP_DISABLE_PIP_VERSION_CHECK=1
TIMINGS=()

step() {  # step "name" command...: run, time, print a timing line, fail loudly
  local name="$1"; shift
  local t0=$SECONDS
  echo "::: ${name}"
  if "$@"; then
    local line; line=$(printf 'timing: %-48s %4d s   (CI so far %4d s)' "${name}" $((SECONDS - t0)) $(( $(date +%s) - CI_T0 )))
    echo "${line}"; TIMINGS+=("${line}")
  else
    local rc=$?
    echo "FAILED (${rc}): ${name} after $((SECONDS - t0)) s"; exit "${rc}"
  fi
}

UV=/tmp/ci-uv/bin/uv
get_uv() {  # uv (PyPI) into its own virtualenv: ~10x faster than pip for the venvs below
  rm -rf /tmp/ci-uv && "${PY}" -m venv /tmp/ci-uv
  /tmp/ci-uv/bin/python -m pip install -q uv > /tmp/ci-uv.pip.log 2>&1 || { tail -20 /tmp/ci-uv.pip.log; return 1; }
  "${UV}" --version
}

make_venv() {  # make_venv DIR pip-args...: a fresh virtualenv (uv's/pip's package cache is used)
  local dir="$1"; shift
  rm -rf "${dir}"
  if [ -x "${UV}" ]; then
    "${UV}" venv -q -p "$(command -v "${PY}")" "${dir}"
    VIRTUAL_ENV="${dir}" "${UV}" pip install -q "$@" > "${dir}.pip.log" 2>&1 || { tail -30 "${dir}.pip.log"; return 1; }
    VIRTUAL_ENV="${dir}" "${UV}" pip check
  else
    "${PY}" -m venv "${dir}"
    "${dir}/bin/python" -m pip install -q "$@" > "${dir}.pip.log" 2>&1 || { tail -30 "${dir}.pip.log"; return 1; }
    "${dir}/bin/python" -m pip check
  fi
  "${dir}/bin/python" -c 'import ipykernel, jupyterlab, ipympl, ipywidgets, aare_lab; print("  ipykernel", ipykernel.__version__, "jupyterlab", jupyterlab.__version__, "ipympl", ipympl.__version__, "ipywidgets", ipywidgets.__version__)'
}

notebooks() {  # the notebooks nbval runs: notebooks/*.ipynb, or the stand-in while there are none
  if compgen -G "notebooks/*.ipynb" > /dev/null; then
    ls notebooks/*.ipynb
  else
    echo "  (no notebooks/*.ipynb yet: nbval runs the browser test's stand-in)" >&2
    echo tests/browser/fixtures/standin_widgets.ipynb
  fi
}

nbval() {  # nbval VENV: every notebook, headless, as a user's kernel would (no MPLBACKEND)
  # shellcheck disable=SC2046
  env -u MPLBACKEND "$1/bin/python" -m pytest -p no:cacheprovider --nbval-lax --nbval-current-env \
    --nbval-cell-timeout=300 -o addopts="-ra --strict-markers" $(notebooks)
}

widget_tests() {  # widget_tests VENV
  if compgen -G "tests/test_widgets*.py" > /dev/null; then
    "$1/bin/python" -m pytest -p no:cacheprovider tests/test_widgets*.py
  else
    echo "  no tests/test_widgets*.py yet (the widgets work writes them): nothing to run"
  fi
}

browser() {  # browser VENV MODES
  AARE_LAB_BROWSER_MODES="$2" "$1/bin/python" -m pytest -p no:cacheprovider -m browser tests/browser
}

binder_pins() {  # the binder venv holds what binder/requirements.txt pins
  AARE_LAB_BINDER_ENV=1 "$1/bin/python" -m pytest -p no:cacheprovider tests/browser/test_binder_spec.py
}

repo2docker_check() {  # binder/ is what repo2docker would build from (no docker needed for --no-build)
  rm -rf /tmp/ci-r2d && "${PY}" -m venv /tmp/ci-r2d
  /tmp/ci-r2d/bin/python -m pip install -q jupyter-repo2docker > /tmp/ci-r2d.pip.log 2>&1 || { tail -20 /tmp/ci-r2d.pip.log; return 1; }
  /tmp/ci-r2d/bin/repo2docker --no-build --no-run --debug . > /tmp/ci-r2d.out 2>&1 || { tail -20 /tmp/ci-r2d.out; return 1; }
  grep -q 'Building conda environment for python=3.11' /tmp/ci-r2d.out || { echo "repo2docker does not pick python 3.11"; return 1; }
  grep -q 'pip install --no-cache-dir -r "binder/requirements.txt"' /tmp/ci-r2d.out || { echo "repo2docker does not install binder/requirements.txt"; return 1; }
  echo "  repo2docker $(/tmp/ci-r2d/bin/repo2docker --version): python 3.11, pip install -r binder/requirements.txt"
}

# The ipykernel-6 env takes binder's pins as constraints, except the kernel's own stack.
grep -vE '^(-e|#)|^(ipykernel|ipython|comm)==' binder/requirements.txt | sed '/^$/d' > /tmp/ci-ipk6-constraints.txt

step "chromium (Debian)"                        bash .ci/ensure_chromium.sh
step "uv (PyPI) for the virtualenvs"            get_uv
step "venv ipykernel 7 = binder spec + [test]"  make_venv /tmp/ci-ipk7 -r binder/requirements.txt -e ".[test]"
step "venv ipykernel 6: [test,lab] ipykernel<7" make_venv /tmp/ci-ipk6 -e ".[test,lab]" "ipykernel<7" -c /tmp/ci-ipk6-constraints.txt
step "binder: files parse, env matches pins"    binder_pins /tmp/ci-ipk7
step "binder: repo2docker --no-build"           repo2docker_check
step "ipykernel 7: nbval notebooks"             nbval /tmp/ci-ipk7
step "ipykernel 7: browser, subshells on + off" browser /tmp/ci-ipk7 subshells-on,subshells-off
step "ipykernel 6: nbval notebooks"             nbval /tmp/ci-ipk6
step "ipykernel 6: widget tests"                widget_tests /tmp/ci-ipk6
last=$(printf '%s\n' "${TIMINGS[@]}" | grep 'ipykernel 7: browser' | awk '{print $(NF-6)}')
left=$(( BUDGET_S - ($(date +%s) - CI_T0) ))
if (( left > ${last:-0} / 2 + 60 )); then   # one mode is about half of the two-mode run
  step "ipykernel 6: browser, subshells on"     browser /tmp/ci-ipk6 subshells-on
else
  echo "ipykernel 6 browser run left out: ${left} s left of the ${BUDGET_S} s budget"
fi
echo "Jupyter checks done; browser test artefacts (screenshots per notebook and mode): ${ARTEFACTS}"
printf '%s\n' "${TIMINGS[@]}"
