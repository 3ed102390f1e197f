# The README's two commands: `make run` and `make test`.
GO ?= go

.PHONY: run test build bench vet fmt

run:
	$(GO) run ./cmd/shardmart serve

build:
	$(GO) build -o bin/shardmart ./cmd/shardmart

test: vet
	$(GO) test -count=1 -timeout 75m ./...

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
