/* kinds.c: the cost model's table of the lessons' kinds (13_plan/kinds.h),
 * one line a lesson's model: a new lesson's model is its entry here and
 * its functions beside lessons.c. */
#include "lessons.h"

void lessons_install(void) {
  lesson_kinds[DP05] = lesson_kinds[FSDP06] = lesson_kinds[PP09] = &mlp_kind; /* lessons.c */
  lesson_kinds[CP11] = lesson_kinds[MESH12] = &transformer_kind;              /* lesson_mesh.c */
  lesson_kinds[GPT14] = &gpt14_kind;                                          /* lesson14.c */
}
