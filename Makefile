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
# The backup/restore and repair suites start ten Cassandra nodes between them: they run after
# the rest, one package at a time, so that their JVMs do not share the two cores with the
# fault tests, whose bounds are on how long the shop stalls.
AFTER := github.com/shardmart/shardmart/internal/cassandra/snapshot github.com/shardmart/shardmart/internal/cassandra/repair

test: vet
	$(GO) tool gotestsum --format pkgname -- -count=1 -timeout 75m $$($(GO) list ./... | grep -v -x -F $(addprefix -e ,$(AFTER)))
	$(GO) tool gotestsum --format pkgname -- -count=1 -timeout 40m -p 1 $(AFTER)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
