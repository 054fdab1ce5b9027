# Installs the dashboard's npm packages into WEB_DIR/node_modules when they are missing or were
# installed from another package-lock.json. MARKER records the SHA-256 of the package-lock.json
# that node_modules came from; scripts/install-deps.sh writes the same marker. With a current
# marker nothing runs, so a build needs no network once install-deps.sh has run.
#   cmake -DNPM=<npm> -DWEB_DIR=<web> -DMARKER=<file> -P npm_install.cmake
cmake_minimum_required(VERSION 3.25)
file(SHA256 "${WEB_DIR}/package-lock.json" lock_hash)
set(installed_hash "")
if(EXISTS "${MARKER}")
  file(READ "${MARKER}" installed_hash)
  string(STRIP "${installed_hash}" installed_hash)
endif()
if(installed_hash STREQUAL lock_hash AND EXISTS "${WEB_DIR}/node_modules/esbuild/package.json")
  file(TOUCH "${MARKER}")
  return()
endif()
message(STATUS "Installing the dashboard's npm packages (npm ci) in ${WEB_DIR}")
execute_process(
  COMMAND "${NPM}" ci --prefer-offline --no-audit --no-fund
  WORKING_DIRECTORY "${WEB_DIR}"
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "npm ci failed in ${WEB_DIR} (exit ${result}); run scripts/install-deps.sh "
                      "while the npm registry is reachable")
endif()
file(WRITE "${MARKER}" "${lock_hash}\n")
