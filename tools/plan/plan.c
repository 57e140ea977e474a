/* plan.c: the command line of 13_plan/plan, the tool around lesson 13.
 * The lesson is the cost model (13_plan/cost.c: a step is compute +
 * communication + bubble, from the formulas of 13_plan/formulas.c and the
 * operations of compute.c, each lesson's through lessons.c's table); this
 * file picks the mode:
 *   --measure  this machine's alpha, beta and every op's time (measure.c,
 *              ops.c) into a machine file (cluster.c), then --predict;
 *   --predict  the step's parts, bytes and memory of one mesh (report.c),
 *              from the machine file or a cluster's datasheet (--cluster);
 *   --verify   the lessons run here beside their prediction (verify.c);
 *   --verify-published  published large runs beside theirs (published.c);
 *   --search   every mesh of --gpus devices, ranked (search.c).
 * With no mode it measures and predicts 12's mesh for the ranks it has. */
#include <stdlib.h>

#include "13_plan/cost.h"
#include "cluster.h"
#include "dt.h"
#include "lessons.h"
#include "measure.h"
#include "options.h"
#include "published.h"
#include "report.h"
#include "search.h"
#include "verify.h"

int main(int argc, char **argv) {
  lessons_install(); /* the lessons' formulas and operations, for the model */
  verify_keep_env(); /* --verify starts mpirun itself: MPI_Init's variables must not reach it */
  flags f = PLAN_DEFAULTS;
  dt_option options[] = {PLAN_OPTIONS(&f), DT_END};
  dt_lesson lesson = {
      "13_plan", "the cost model: predict a mesh's step time and memory, check it, plan a cluster",
      1};
  dt_comm *world = dt_init(&argc, &argv, &lesson, options);
  if (f.verify && world->size > 1)
    dt_fail("--verify starts mpirun itself: run it alone, ./13_plan/plan --verify");
  if (f.verify_published && world->size > 1)
    dt_fail("--verify-published runs plan itself: run it alone, ./13_plan/plan --verify-published");
  if (f.verify || f.verify_published) {
    int bad =
        f.verify ? verify(argv[0], f.quick, f.shapes) : verify_published(argv[0], f.published);
    dt_finalize();
    return bad ? 1 : 0;
  }
  model m;
  mesh x;
  machine c;
  if (f.measure && f.cluster)
    dt_fail("--measure measures this machine, --cluster plans for another: give one of them");
  int measuring = f.measure || !(f.predict || f.search || f.cluster); /* --cluster: predict */
  int64_t N = plan_setup(&f, measuring, world->size, &m, &x, &c);     /* ranks, or --gpus */
  if (f.search && m.kind == STATES)
    dt_fail("--search needs a model with a shape (--model or --layers ...), not --params alone");
  if (f.search && m.kind == GPT14)
    dt_fail("--search ranks the planner's meshes; gpt14 is lesson 14's model: --predict a mesh");
  if (f.search) {
    search(&m, &x, &c, N, (int)f.top, f.json);
    free(c.ops);
    dt_finalize();
    return 0;
  }
  plan_mesh(&m, &x, N, f.micro);
  plan_vocab(&f, &m, &x); /* gpt14: its text's */
  mesh_refusal r = mesh_problem(&m, &x, c.gpus_per_node);
  if (r != RUNS) {
    char why[320];
    refusal_text(r, &m, &x, c.gpus_per_node, why, sizeof why);
    dt_fail("%s", why);
  }
  int problems = measuring ? measure(world, &m, &x, &c) : 0;
  if (measuring && world->rank == 0) machine_write(f.machine, &c);
  prediction p;
  predict(&m, &x, &c, &p);
  if (f.json)
    report_json(&m, &x, &c, &p);
  else if (!f.measure || f.predict)
    report_table(&m, &x, &c, &p);
  if (measuring)
    dt_print0("%s: the ring all-reduce's alpha-beta terms: its messages and bytes per rank equal "
              "the measured ring's at every n and size (%d problem(s))\n",
              problems ? "CHECK FAILED" : "CHECK PASSED", problems);
  free(c.ops);
  dt_finalize();
  return problems ? 1 : 0;
}
