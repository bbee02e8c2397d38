package run

import "golang.org/x/sys/unix"

const mapPopulate = unix.MAP_POPULATE
