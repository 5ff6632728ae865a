# The two commands: `make run` (the whole stack, locally) and `make test` (the same set-up,
# then every test). Everything else is a helper.
.PHONY: run test stop logs bench build db backup drill

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

# #34 a full backup of the local cluster with pgBackRest (WAL archived continuously afterwards).
backup:
	bash deploy/local/backup.sh backup

# #34 the drills: point-in-time restore, then failover on a three-node Patroni cluster
# (deploy/ha/cluster.sh): leader killed, lagging replica, etcd down.
drill:
	swift build
	bash deploy/local/backup.sh drill
	python3 deploy/ha/drill.py
