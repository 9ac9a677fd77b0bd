
# json.patch as OPA's: regorus's value, which is OPA's wherever regorus has one (undefined where OPA errs)
__rk_b_patched(a, b) := json.patch(a, b)

# object.subset as OPA's (topdown/subset.go); in v0's syntax too (no `in`, no `every`)
__rk_b_subset_types(a, b) if {
	is_object(a)
	is_object(b)
}

__rk_b_subset_types(a, b) if {
	is_set(a)
	is_set(b)
}

__rk_b_subset_types(a, b) if {
	is_array(a)
	is_array(b)
}

__rk_b_subset_types(a, b) if {
	is_array(a)
	is_set(b)
}

__rk_b_subset_of(a, b) := __rk_b_subset_objects(a, b) if {
	is_object(a)
} else := count(b - a) == 0 if {
	is_set(a)
} else := __rk_b_subset_run(a, b) if {
	is_array(b)
} else := __rk_b_subset_members(a, b)

# an array holds another as a run of its items (compared in Rego: Python cannot receive a set of arrays)
__rk_b_subset_run(a, b) := true if {
	count(b) <= count(a)
	i := numbers.range(0, count(a) - count(b))[_]
	not __rk_b_subset_differs(a, b, i)
} else := false

__rk_b_subset_differs(a, b, i) if {
	k := numbers.range(0, count(b) - 1)[_]
	a[i + k] != b[k]
}

# an array holds a set when as many of its items (duplicates too) are members: the empty array none
__rk_b_subset_members(a, b) := true if {
	count(a) > 0
	count([m | m := a[_]; b[m]]) >= count(b)
} else := false

# objects: each path of the second through objects of both leads to a value the first holds
__rk_b_subset_objects(a, b) := false if {
	walk(b, [path, value])
	count(path) > 0
	not __rk_b_subset_off(a, b, path)
	not __rk_b_subset_holds(a, path, value)
} else := true

__rk_b_subset_off(a, b, path) if {
	n := numbers.range(0, count(path) - 1)[_]
	not __rk_b_subset_objects_at(a, b, [e | e := path[j]; j < n])
}

__rk_b_subset_objects_at(a, b, prefix) if {
	is_object(object.get(a, prefix, null))
	is_object(object.get(b, prefix, null))
}

__rk_b_subset_holds(a, path, value) if {
	parent := object.get(a, [e | e := path[j]; j < count(path) - 1], null)
	found := parent[path[count(path) - 1]]
	__rk_b_subset_value(found, value)
}

__rk_b_subset_value(found, value) if {
	is_object(found)
	is_object(value)
}

__rk_b_subset_value(found, value) if {
	found == value
}

__rk_b_subset_value(found, value) if {
	is_set(found)
	is_set(value)
	count(value - found) == 0
}

__rk_b_subset_value(found, value) if {
	is_array(found)
	is_array(value)
	__rk_b_subset_run(found, value)
}
