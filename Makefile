# The two commands: `make run` (the whole stack, locally) and `make test` (the same set-up,
# then every test). Everything else is a helper.
.PHONY: run test stop logs trace bench build db backup drill lint check openapi format

run:
	bash deploy/local/stack.sh run

test:
	bash deploy/local/stack.sh test

stop:
	bash deploy/local/stack.sh stop

logs:
	bash deploy/local/stack.sh logs

# #49 one request's story across the services, the outboxes and the jobs, as a waterfall:
# ID is the X-Request-ID of an answer (or a log line's trace_id).
trace:
	python3 deploy/local/trace.py "$(ID)"

db:
	bash deploy/local/stack.sh db

build:
	swift build

# #36 the house's rules: SQL only in Store/, Domain/ pure, each service's error catalogue equal
# to its OpenAPI document's, formatted as .swift-format says. `make format` fixes the last.
lint:
	python3 deploy/local/lint.py

# #50 the rules and the database-free tests (deploy/local/check.sh), seconds after a build.
check:
	bash deploy/local/check.sh

# #50 the four OpenAPI documents, docs/ERRORS.md and docs/CONFIGURATION.md, generated again from the code.
openapi:
	cd deploy/local && python3 openapi_gen.py && python3 error_codes.py && python3 configuration_doc.py

format:
	swift format format -i -r --parallel --configuration .swift-format Package.swift Services Shared Tests Tools Clients

bench:
	bash deploy/local/bench.sh

# #34 a full backup of the local cluster with pgBackRest (WAL archived continuously afterwards).
backup:
	bash deploy/local/backup.sh backup

# #34 the drills: point-in-time restore, then failover on a three-node Patroni cluster
# (deploy/ha/cluster.sh): leader killed, lagging replica, etcd down.
# The service binaries, built unless they are newer than every source (after make test they
# are: a build in another environment would run SwiftPM's plugin tools again, about a minute).
drill:
	@bin=$$(swift build --show-bin-path); \
	if [ -x "$$bin/auth-service" ] && [ -z "$$(find Package.swift Package.resolved Services Shared -newer "$$bin/auth-service" -type f -print -quit)" ]; then \
	  echo "the service binaries are newer than the sources: not built again"; else swift build; fi
	bash deploy/local/backup.sh drill
	python3 deploy/ha/drill.py
