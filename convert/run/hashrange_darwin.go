package run

const mapPopulate = 0 // no MAP_POPULATE: pages are mapped as they are touched
