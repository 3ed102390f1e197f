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
# The fault suites bound how long the shop stalls while a node or a process is frozen, killed
# or cut off (Cassandra and MongoDB fault tests, several serve processes): they run after the
# rest, one package at a time, so that no other suite's servers share the two cores with them.
# In parallel with the rest, a SIGKILL's stall went from 0.6-2.1 s to 4.4-6.0 s (load 26), and
# the three suites failed their timing bounds in a CI-like run. The backup/restore and repair
# suites start ten Cassandra nodes between them and run there too.
# On a fresh machine `.ci/run` compiles every package and test binary into the build cache
# before it calls this target (while its downloads run), so that the first phase only links
# its test binaries instead of compiling them while other packages' clusters hold both cores.
AFTER := $(addprefix github.com/shardmart/shardmart/internal/,cassandra/faulttest mongodb/faulttest testkit/scaleout cassandra/snapshot cassandra/repair)

test: vet
	$(GO) tool gotestsum --format pkgname -- -count=1 -timeout 75m $$($(GO) list ./... | grep -v -x -F $(addprefix -e ,$(AFTER)))
	$(GO) tool gotestsum --format pkgname -- -count=1 -timeout 40m -p 1 $(AFTER)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
