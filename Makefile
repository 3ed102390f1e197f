# The README's two commands: `make run` and `make test`.
GO ?= go

.PHONY: run test build bench vet

run:
	$(GO) run ./cmd/shardmart serve

build:
	$(GO) build -o bin/shardmart ./cmd/shardmart

# gotestsum (a tool dependency in go.mod) prints every skipped test with its reason, so a
# test that did not run (the one that needs a mongos, the opt-in fault tests) is never mistaken
# for a pass.
test: vet
	$(GO) tool gotestsum --format pkgname -- -count=1 -timeout 75m ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
