
${name}(a0, a1) := __rk_b_subset_of(a0, a1) if {
	__rk_b_subset_types(a0, a1)
} else := ${fail}("object.subset: both arguments object.subset must be of the same type or array and set")
