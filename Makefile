# The two commands: `make run` (the whole stack, locally) and `make test` (the same set-up,
# then every test). Everything else is a helper.
.PHONY: run test stop logs bench build db

run:
	bash deploy/local/stack.sh run

test:
	bash deploy/local/stack.sh test

stop:
	bash deploy/local/stack.sh stop

logs:
	bash deploy/local/stack.sh logs

db:
	bash deploy/local/stack.sh db

build:
	swift build

bench:
	bash deploy/local/bench.sh
