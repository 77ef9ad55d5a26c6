#!/usr/bin/env bash
# Build one release of PSI's aare from its PyPI sdist into a virtualenv of its own, for
# CPython 3.11 (PyPI has aare wheels for cp312/cp313 only). aare_lab's oracle tests
# (tests/test_aare_oracle.py) run our finders against two releases:
#
#   AARE_VERSION=2026.3.17 VENV=/opt/aare-2026.3.17 bash tools/install_aare.sh
#   AARE_VERSION=2026.9.30 VENV=/opt/aare-2026.9.30 bash tools/install_aare.sh
#
# Environment (defaults in brackets):
#   AARE_VERSION  2026.3.17 or 2026.9.30 [2026.9.30]
#   VENV          the virtualenv to create or reuse [/tmp/aare-$AARE_VERSION]
#   WORK          scratch folder for the build [/tmp/aare-build-$AARE_VERSION]
#   PYTHON        a CPython 3.11 interpreter [python3]
#   AARE_SDIST    a local copy of the sdist tarball, instead of downloading it from PyPI
#   JOBS          parallel compile jobs [nproc]
#
# Written for Debian 12 on x86_64, run as root (it installs build tools with apt-get);
# re-running it rebuilds aare in the same virtualenv. It downloads only from the Debian
# archive (apt) and PyPI (pip): aare's CMake would clone its dependencies from GitHub with
# FetchContent, which is switched off (FETCHCONTENT_FULLY_DISCONNECTED) and replaced:
#   fmt, nlohmann_json, ZeroMQ  Debian's packages (AARE_SYSTEM_LIBRARIES=ON), with two
#                               CMake config shims written below (see write_cmake_shims)
#   pybind11                    the PyPI wheel: aare needs >= 3.0.3, Debian 12 has 2.10
#   Minuit2 (2026.9.30)         ROOT's sources as bundled in the iminuit sdist, built by a
#                               small CMake project written below
#   lmfit (2026.3.17)           not packaged anywhere; a stand-in whose fit functions
#                               abort, since the cluster finder never calls them
# No file of aare's own source is changed.
set -euo pipefail

AARE_VERSION=${AARE_VERSION:-2026.9.30}
VENV=${VENV:-/tmp/aare-${AARE_VERSION}}
WORK=${WORK:-/tmp/aare-build-${AARE_VERSION}}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
AARE_SPEC=${AARE_SDIST:-aare==${AARE_VERSION}}

# Build-time Python packages, pinned to what resolved for cp311 when this was written, so
# two builds of one release are built alike.
IMINUIT_VERSION=2.33.0    # only its sdist is used, for the Minuit2 sources
PYBIND11_VERSION=3.1.0
SKBUILD_VERSION=1.1.2
NUMPY_VERSION=2.4.6
MATPLOTLIB_VERSION=3.11.2

case "$AARE_VERSION" in
  2026.3.17|2026.9.30) ;;
  *) echo "AARE_VERSION=$AARE_VERSION: this script knows how to build 2026.3.17 and 2026.9.30" >&2
     exit 1 ;;
esac
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "PYTHON=$PYTHON is not CPython 3.11" >&2; exit 1; }

install_build_tools() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends \
    build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev libzmq3-dev
}

make_venv() {
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -U pip
  # numpy and matplotlib are aare's run-time dependencies; the build runs without isolation.
  "$VENV/bin/python" -m pip install -q \
    "scikit-build-core==${SKBUILD_VERSION}" "pybind11==${PYBIND11_VERSION}" \
    "numpy==${NUMPY_VERSION}" "matplotlib==${MATPLOTLIB_VERSION}"
}

write_minuit2_project() {
  local root="$WORK/iminuit-${IMINUIT_VERSION}/extern/root"
  if [ ! -d "$root/math/minuit2" ]; then
    # Only iminuit itself as an sdist: with --no-binary :all: pip would also build, from
    # source, every build dependency its metadata step needs, which takes many minutes.
    "$VENV/bin/python" -m pip download -q --no-deps --no-binary iminuit \
      "iminuit==${IMINUIT_VERSION}" -d "$WORK"
    tar -xzf "$WORK/iminuit-${IMINUIT_VERSION}.tar.gz" -C "$WORK"
  fi
  mkdir -p "$WORK/minuit2/include"
  # ROOT's Math/Types.h includes RConfigure.h, which ROOT's own build generates; an empty
  # one is enough (iminuit does the same).
  echo '// empty: stands in for the header ROOT generates' > "$WORK/minuit2/include/RConfigure.h"
  # aare links the targets Minuit2 and Minuit2Math that its FetchContent checkout defines.
  cat > "$WORK/minuit2/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.15)
project(Minuit2FromIminuit LANGUAGES CXX)
set(ROOTSRC "${root}")
set(M2SRC
  AnalyticalGradientCalculator BFGSErrorUpdator CombinedMinimumBuilder
  DavidonErrorUpdator ExternalInternalGradientCalculator FumiliBuilder
  FumiliErrorUpdator FumiliGradientCalculator FumiliMinimizer
  FumiliStandardChi2FCN FumiliStandardMaximumLikelihoodFCN
  HessianGradientCalculator InitialGradientCalculator MPIProcess
  MinimumBuilder MnApplication MnContours MnCovarianceSqueeze MnEigen MnFcn
  MnFumiliMinimize MnFunctionCross MnGlobalCorrelationCoeff MnHesse
  MnLineSearch MnMachinePrecision MnMatrix MnMinos MnParabolaFactory
  MnParameterScan MnParameterTransformation MnPlot MnPosDef MnPrint
  MnPrintImpl MnScan MnSeedGenerator MnStrategy MnTraceObject
  MnUserParameterState MnUserParameters MnUserTransformation
  ModularFunctionMinimizer NegativeG2LineSearch Numerical2PGradientCalculator
  ParametricFunction ScanBuilder SimplexBuilder SimplexParameters
  SimplexSeedGenerator VariableMetricBuilder VariableMetricEDMEstimator
  mnbins mntplot)
list(TRANSFORM M2SRC PREPEND "\${ROOTSRC}/math/minuit2/src/")
list(TRANSFORM M2SRC APPEND ".cxx")
add_library(Minuit2Math STATIC "\${ROOTSRC}/math/mathcore/src/Util.cxx")
target_include_directories(Minuit2Math PUBLIC
  "\${ROOTSRC}/math/mathcore/inc" "\${ROOTSRC}/core/foundation/inc"
  "\${CMAKE_CURRENT_SOURCE_DIR}/include")
add_library(Minuit2 STATIC \${M2SRC})
target_include_directories(Minuit2 PUBLIC "\${ROOTSRC}/math/minuit2/inc")
target_link_libraries(Minuit2 PUBLIC Minuit2Math)
EOF
}

write_cmake_shims() {
  mkdir -p "$WORK/cmake-shims/ZeroMQ" "$WORK/cmake-shims/nlohmann_json"
  # aare calls find_package(ZeroMQ 4 REQUIRED) (and never links it); Debian's libzmq3-dev
  # has only pkg-config metadata, so wrap that in a config package.
  cat > "$WORK/cmake-shims/ZeroMQ/ZeroMQConfig.cmake" <<'EOF'
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZMQ_PC REQUIRED IMPORTED_TARGET libzmq)
if(NOT TARGET libzmq)
  add_library(libzmq INTERFACE IMPORTED)
  target_link_libraries(libzmq INTERFACE PkgConfig::ZMQ_PC)
endif()
set(ZeroMQ_FOUND TRUE)
EOF
  cat > "$WORK/cmake-shims/ZeroMQ/ZeroMQConfigVersion.cmake" <<'EOF'
execute_process(COMMAND pkg-config --modversion libzmq
  OUTPUT_VARIABLE PACKAGE_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE)
if(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
endif()
EOF
  # aare asks for nlohmann_json >= 3.11.3 and Debian 12 has 3.11.2, with which aare builds
  # and passes its tests. Debian's own config re-checks the version, so load its imported
  # target directly and accept any 3.x.
  cat > "$WORK/cmake-shims/nlohmann_json/nlohmann_jsonConfig.cmake" <<'EOF'
if(NOT TARGET nlohmann_json::nlohmann_json)
  include(/usr/share/cmake/nlohmann_json/nlohmann_jsonTargets.cmake)
endif()
set(nlohmann_json_FOUND TRUE)
EOF
  cat > "$WORK/cmake-shims/nlohmann_json/nlohmann_jsonConfigVersion.cmake" <<'EOF'
include(/usr/share/cmake/nlohmann_json/nlohmann_jsonConfigVersion.cmake)
if(PACKAGE_FIND_VERSION_MAJOR EQUAL 3)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  set(PACKAGE_VERSION_UNSUITABLE FALSE)
endif()
EOF
}

write_lmfit_stand_in() {
  local dir="$WORK/lmfit-stand-in"
  mkdir -p "$dir/lib"
  cat > "$dir/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.15)
project(lmfit_stand_in LANGUAGES C)
add_library(lmfit STATIC lib/stand_in.c)
target_include_directories(lmfit PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/lib)
EOF
  # The declarations aare's fitting code compiles against.
  cat > "$dir/lib/lmstruct.h" <<'EOF'
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
typedef struct { double ftol, xtol, gtol, epsilon, stepbound; int patience, scale_diag;
                 void* msgfile; int verbosity, n_maxpri, m_maxpri; } lm_control_struct;
typedef struct { double fnorm; int nfev; int outcome; int userbreak; } lm_status_struct;
extern const lm_control_struct lm_control_double;
extern const lm_control_struct lm_control_float;
#ifdef __cplusplus
}
#endif
EOF
  cat > "$dir/lib/lmcurve.h" <<'EOF'
#pragma once
#include "lmstruct.h"
#ifdef __cplusplus
extern "C" {
#endif
void lmcurve(const int n_par, double* par, const int m_dat, const double* t, const double* y,
             double (*f)(const double t, const double* par), const lm_control_struct* control,
             lm_status_struct* status);
#ifdef __cplusplus
}
#endif
EOF
  cat > "$dir/lib/lmcurve2.h" <<'EOF'
#pragma once
#include "lmstruct.h"
#ifdef __cplusplus
extern "C" {
#endif
void lmcurve2(const int n_par, double* par, double* parerr, double* covar, const int m_dat,
              const double* t, const double* y, const double* dy,
              double (*f)(const double t, const double* par), const lm_control_struct* control,
              lm_status_struct* status);
#ifdef __cplusplus
}
#endif
EOF
  printf '#pragma once\n#include "lmcurve.h"\n#include "lmcurve2.h"\n' > "$dir/lib/lmfit.hpp"
  # Fitting is not part of what the oracle tests use; a call aborts rather than returning
  # a made-up fit.
  cat > "$dir/lib/stand_in.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include "lmcurve.h"
#include "lmcurve2.h"
const lm_control_struct lm_control_double = {0};
const lm_control_struct lm_control_float = {0};
static void unavailable(void)
{
    fprintf(stderr, "lmfit is not available in this aare build (tools/install_aare.sh)\n");
    abort();
}
void lmcurve(const int n_par, double* par, const int m_dat, const double* t, const double* y,
             double (*f)(const double, const double*), const lm_control_struct* c,
             lm_status_struct* s)
{ unavailable(); }
void lmcurve2(const int n_par, double* par, double* parerr, double* covar, const int m_dat,
              const double* t, const double* y, const double* dy,
              double (*f)(const double, const double*), const lm_control_struct* c,
              lm_status_struct* s)
{ unavailable(); }
EOF
}

build_aare() {
  local log="$WORK/pip-install-aare.log"
  export CMAKE_BUILD_PARALLEL_LEVEL="$JOBS"
  # Each release only reads the FETCHCONTENT_SOURCE_DIR_* of the dependency it has.
  "$VENV/bin/python" -m pip install -v --no-cache-dir --no-build-isolation \
    --force-reinstall --no-deps --no-binary aare "$AARE_SPEC" \
    -C cmake.define.AARE_SYSTEM_LIBRARIES=ON \
    -C cmake.define.FETCHCONTENT_FULLY_DISCONNECTED=ON \
    -C cmake.define.AARE_FETCH_MINUIT2=ON \
    -C cmake.define.FETCHCONTENT_SOURCE_DIR_MINUIT2="$WORK/minuit2" \
    -C cmake.define.AARE_FETCH_LMFIT=ON \
    -C cmake.define.FETCHCONTENT_SOURCE_DIR_LMFIT="$WORK/lmfit-stand-in" \
    -C cmake.define.ZeroMQ_DIR="$WORK/cmake-shims/ZeroMQ" \
    -C cmake.define.nlohmann_json_DIR="$WORK/cmake-shims/nlohmann_json" \
    -C cmake.define.pybind11_DIR="$("$VENV/bin/python" -m pybind11 --cmakedir)" \
    -C build-dir="$WORK/skbuild" \
    > "$log" 2>&1 \
    || { tail -60 "$log"; echo "aare build failed; the full log is $log" >&2; exit 1; }
}

mkdir -p "$WORK"
install_build_tools
make_venv
write_minuit2_project
write_cmake_shims
write_lmfit_stand_in
time build_aare
# Import from outside the build folder, so the installed package is the one checked.
cd /
"$VENV/bin/python" -c 'import aare, aare._aare; print("aare", getattr(aare, "__version__", "?"), "from", aare.__file__)'
