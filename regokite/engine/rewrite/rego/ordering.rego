
${name}(a0) := ${builtin}(a0) if {
	not contains(json.marshal(a0), "{")
} else := ${builtin}(a0) if {
	__rk_b_mixing(a0) == 0
} else := ${ordered} if {
	__rk_b_mixing(a0) == 1
} else := ${unordered}("${builtin}")
