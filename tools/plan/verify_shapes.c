/* verify_shapes.c: the shapes --verify runs (each lesson and flags, the
 * plan's flags for the same mesh), and --shapes' choice among them. */
#include <stdio.h>
#include <string.h>

#include "verify.h"

static const verify_shape table[] = {
    {1, "12_mesh/mesh", "", "--model mesh12"},
    {2, "12_mesh/mesh", "--dp 2", "--model mesh12 --dp 2"},
    {2, "12_mesh/mesh", "--pp 2", "--model mesh12 --pp 2"},
    {2, "12_mesh/mesh", "--cp 2", "--model mesh12 --cp 2"},
    {2, "12_mesh/mesh", "--tp 2", "--model mesh12 --tp 2"},
    {2, "12_mesh/mesh", "--dp 2 --zero 1", "--model mesh12 --dp 2 --zero 1"},
    {2, "12_mesh/mesh", "--cp 2 --split zigzag", "--model mesh12 --cp 2 --split zigzag"},
    {2, "12_mesh/mesh", "--pp 2 --schedule gpipe", "--model mesh12 --pp 2 --schedule gpipe"},
    {2, "11_cp/cp", "", "--model cp11 --cp 2"},
    {2, "05_dp/dp", "", "--model dp05 --dp 2 --opt sgd"},
    {2, "06_fsdp/fsdp", "--zero 1", "--model fsdp06 --dp 2 --zero 1 --opt sgd"},
    {2, "06_fsdp/fsdp", "--zero 2", "--model fsdp06 --dp 2 --zero 2 --opt sgd"},
    {2, "06_fsdp/fsdp", "--zero 3", "--model fsdp06 --dp 2 --zero 3 --opt sgd"},
    {2, "09_pp/pp", "", "--model pp09 --pp 2 --opt sgd"},
    /* 09's other plans: interleaved (09 and 12) and ZB-H1, their bubble slots compared too */
    {2, "09_pp/pp", "--virtual-stages 2", "--model pp09 --pp 2 --opt sgd --virtual-stages 2"},
    {2, "09_pp/pp", "--schedule zb1", "--model pp09 --pp 2 --opt sgd --schedule zb1"},
    {2, "12_mesh/mesh", "--pp 2 --virtual-stages 2", "--model mesh12 --pp 2 --virtual-stages 2"},
    {2, "12_mesh/mesh", "--pp 2 --schedule zb1", "--model mesh12 --pp 2 --schedule zb1"},
    {4, "12_mesh/mesh", "--cp 2 --tp 2", "--model mesh12 --cp 2 --tp 2"},
    {8, "12_mesh/mesh", "", "--model mesh12 --pp 2 --cp 2 --tp 2"},
    /* 14 on its default text (README.md, which every checkout has), V read from it */
    {1, "14_gpt/gpt", "", "--model gpt14"},
    {2, "14_gpt/gpt", "--dp 2", "--model gpt14 --dp 2"},
    {2, "14_gpt/gpt", "--tp 2", "--model gpt14 --tp 2"},
    {2, "14_gpt/gpt", "--pp 2", "--model gpt14 --pp 2"},
    {2, "14_gpt/gpt", "--cp 2", "--model gpt14 --cp 2"},
    {2, "14_gpt/gpt", "--tp 2 --sequence-parallel", "--model gpt14 --tp 2 --sequence-parallel"},
    /* 14 through 09's other plans: its 2 layers are 4 here, pp x V */
    {2, "14_gpt/gpt", "--pp 2 --virtual-stages 2 --layers 4",
     "--model gpt14 --pp 2 --virtual-stages 2 --layers 4"},
    {2, "14_gpt/gpt", "--pp 2 --schedule zb1", "--model gpt14 --pp 2 --schedule zb1"},
    {4, "14_gpt/gpt", "--cp 2 --tp 2", "--model gpt14 --cp 2 --tp 2"},
    {8, "14_gpt/gpt", "", "--model gpt14 --pp 2 --cp 2 --tp 2"}};
_Static_assert(sizeof table / sizeof *table == VERIFY_NSHAPES,
               "VERIFY_NSHAPES (verify.h) counts them");
const verify_shape *const verify_shapes = table;

/* label holds one of the comma-separated texts of `list`; a text ending in
 * '$' must end the label ("09_pp/pp $": 09's defaults alone) */
int verify_holds_any(const char *label, const char *list) {
  char one[128];
  for (const char *at = list; *at;) {
    size_t len = strcspn(at, ","), n = strlen(label);
    snprintf(one, sizeof one, "%.*s", (int)len, at);
    size_t k = strlen(one);
    int end = k && one[k - 1] == '$';
    one[k - end] = 0;
    if (len && (end ? k - 1 <= n && !strcmp(label + n - (k - 1), one) : strstr(label, one) != NULL))
      return 1;
    at += len + (at[len] == ',');
  }
  return 0;
}
