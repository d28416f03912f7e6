# Quick start:  make demo   (install missing Debian packages, build, run the main job)
#               make test   (the same set-up, then every test)
JOBS ?= 2
PRESET ?= dev
BUILD_DIR := build
DPLACE := $(BUILD_DIR)/bin/dplace

.PHONY: deps build demo test bench clean format

deps:
	bash scripts/install-deps.sh

# Configure after the packages are in (order-only, so `make -jN` cannot run the two at once). The
# stamp is the generated Makefile, not CMakeCache.txt, which a failed configure leaves behind.
$(BUILD_DIR)/Makefile: | deps
	cmake --preset $(PRESET)

build: deps $(BUILD_DIR)/Makefile
	cmake --build $(BUILD_DIR) -j$(JOBS)

demo: build
	bash scripts/demo.sh $(DPLACE)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 900

bench: deps
	cmake --preset release
	cmake --build build-release -j$(JOBS) --target sim_bench
	build-release/bench/sim_bench

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) build-release build-asan
