
${name}(a0, a1) := [""] if {
	a1 == ""
	a0 != ""
	regex.split(a0, a1)
} else := array.slice(pieces, lo, hi) if {
	pieces := regex.split(a0, a1)
	found := regex.find_n(a0, a1, -1)
	lo := count({1 | count(found) > 0; found[0] == ""; pieces[0] == ""})
	hi := count(pieces) - count({1 | count(found) > 0; found[count(found) - 1] == ""; pieces[count(pieces) - 1] == ""})
}
