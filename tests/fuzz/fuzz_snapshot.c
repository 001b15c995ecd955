/* The snapshot reader (--snapshot, `discover --json` output): whatever it
 * accepts it writes back the same, so a replay decides on exactly what was
 * saved (read -> write -> read -> write is a fixed point). */
#include "fuzz.h"

#include "nic/nic.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_error_t je;
	json_t *root = json_loadb((const char *)data, size, 0, &je);
	if (!root)
		return 0;
	struct nic_list l1 = { 0 }, l2 = { 0 };
	np_error err = { 0 };
	if (nic_list_from_json(root, &l1, &err) < 0) {
		FUZZ_CHECK(err.status == NP_EUSAGE && err.msg[0] && !strchr(err.msg, '\n'), "'%s'",
			   err.msg);
		json_decref(root);
		return 0;
	}
	json_decref(root);
	json_t *j1 = nic_list_to_json(&l1);
	FUZZ_CHECK(j1, "to_json");
	FUZZ_CHECK(nic_list_from_json(j1, &l2, &err) == 0, "re-read: %s", err.msg);
	json_t *j2 = nic_list_to_json(&l2);
	char *s1 = json_dumps(j1, JSON_SORT_KEYS | JSON_COMPACT);
	char *s2 = json_dumps(j2, JSON_SORT_KEYS | JSON_COMPACT);
	FUZZ_CHECK(s1 && s2 && !strcmp(s1, s2), "%s != %s", s1, s2);
	free(s1);
	free(s2);
	json_decref(j1);
	json_decref(j2);
	nic_list_free(&l1);
	nic_list_free(&l2);
	return 0;
}
