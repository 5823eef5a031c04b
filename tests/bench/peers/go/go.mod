module fiberd/tests/bench/peers/go

go 1.19
