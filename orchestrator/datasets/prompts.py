"""Training prompts for demo drafters, generated from templates. Disjoint from the `smoke` dataset and the
benchmark datasets used for evaluation (checked in `training_prompts`). Deterministic for a seed.

Variety matters more than volume: a drafter trained on a few templates fits them (training accuracy 0.8) and
transfers poorly to hand-written prompts, so there are many templates in five families (code, arithmetic,
explanation / advice, rewriting, writing) over large slot vocabularies, and the generator cycles through the
families so every family gets the same share."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re

# The demo drafters' training set: the first DEFAULT_NUM_PROMPTS prompts of the stream of seed DEFAULT_SEED
# (drafters/train/settings.py TrainSettings takes its defaults from here; `demo-heldout` holds the next 64).
DEFAULT_NUM_PROMPTS = 1000
DEFAULT_SEED = 0

NEAR_DUPLICATE = 0.5  # a training prompt sharing this fraction of its words with an evaluation prompt is skipped

TOPICS = ["photosynthesis", "the water cycle", "black holes", "compound interest", "the immune system", "volcanoes",
          "machine learning", "the French Revolution", "plate tectonics", "vaccines", "inflation", "gravity",
          "the internet", "climate change", "the printing press", "electric cars", "the human heart", "bees",
          "recycling", "solar panels", "the Roman Empire", "DNA", "earthquakes", "tides", "rainbows", "coffee",
          "sleep", "memory", "chess", "jazz", "the moon landing", "antibiotics", "glaciers", "batteries", "bridges",
          "democracy", "supply and demand", "the stock market", "oceans", "deserts", "language learning",
          "time zones", "elections", "nuclear power", "wind turbines", "bread making", "friendship", "exercise",
          "thunderstorms", "the seasons", "magnets", "electricity", "the solar system", "dinosaurs", "fossils",
          "the Renaissance", "money", "taxes", "banks", "rain forests", "coral reefs", "evolution", "atoms",
          "the periodic table", "nutrition", "vitamins", "the brain", "dreams", "music theory", "photography",
          "airplanes", "rockets", "satellites", "GPS", "encryption", "passwords", "cloud computing", "databases",
          "operating systems", "open source software", "social media", "video games", "the Olympic Games",
          "gardening", "composting", "honey", "chocolate", "cheese making", "the Great Wall of China", "pyramids",
          "the printing of books", "public libraries", "museums", "volunteering", "meditation", "stress",
          "teamwork", "leadership", "negotiation", "public speaking", "budgeting", "renting an apartment"]
AUDIENCES = ["a child", "a ten-year-old", "a high-school student", "a busy manager", "a beginner", "an expert",
             "a grandparent", "a new employee", "a tourist", "a university student"]
CODE_TASKS = ["reverses a linked list", "counts the vowels in a string", "merges two sorted lists",
              "computes the greatest common divisor of two numbers", "checks whether a number is prime",
              "flattens a nested list", "returns the most common word in a text", "converts Celsius to Fahrenheit",
              "removes whitespace from both ends of every line", "finds the second largest number in a list",
              "validates an email address with a regular expression", "computes a running average",
              "groups words by their first letter", "rotates a matrix by 90 degrees", "parses a CSV line",
              "computes the factorial of n iteratively", "checks whether two strings are anagrams",
              "returns the indices of two numbers that add up to a target", "implements binary search",
              "counts the words in a file", "transposes a matrix", "generates the first n prime numbers",
              "capitalises the first letter of every word", "sums the digits of an integer",
              "sorts a list of dictionaries by a key", "removes duplicates from a list while keeping the order",
              "checks whether parentheses in a string are balanced", "converts a Roman numeral to an integer",
              "returns the longest word in a sentence", "computes the average of a list of numbers",
              "finds the minimum and maximum of a list in one pass", "counts how often each character appears",
              "reverses the words in a sentence", "checks whether a year is a leap year",
              "converts a binary string to an integer", "computes the n-th triangular number",
              "splits a list into chunks of size n", "returns the intersection of two lists",
              "computes the distance between two points", "formats a number with thousands separators",
              "reads a text file and prints its last ten lines", "implements a simple queue",
              "computes compound interest for a number of years", "checks whether a string is a valid IPv4 address"]
LANGS = ["Python", "JavaScript", "Go", "Rust", "Java", "C", "TypeScript", "C++", "Ruby", "Kotlin"]
SNIPPETS = ["`total = sum(x * x for x in range(10))`", "`names = [n.strip().title() for n in raw.split(',')]`",
            "`counts = {}; [counts.update({w: counts.get(w, 0) + 1}) for w in text.split()]`",
            "`const evens = nums.filter(n => n % 2 === 0);`", "`for i in range(len(a) - 1, -1, -1): print(a[i])`",
            "`result = max(items, key=len)`", "`squares = dict((i, i ** 2) for i in range(5))`",
            "`SELECT name FROM users WHERE age > 30 ORDER BY name;`", "`ls -1 | wc -l`",
            "`data = json.loads(open('config.json').read())`", "`x = a if a > b else b`",
            "`words.sort(key=lambda w: (len(w), w))`"]
BUGGY = ["`def square(x): return x * 2`", "`def is_even(n): return n % 2 == 1`",
         "`def last(items): return items[len(items)]`", "`for i in range(1, 10): total =+ i`",
         "`def average(xs): return sum(xs) / len(xs) + 1`", "`if name = 'admin': print('hi')`",
         "`def greet(name): print('Hello ' + Name)`", "`def maximum(a, b): return a if a < b else b`"]
TABLES = [("employees(id, name, department, salary)", "the average salary per department"),
          ("products(id, name, price, category)", "the three most expensive products in each category"),
          ("students(id, name, grade)", "the number of students in each grade"),
          ("orders(id, customer, total, created_at)", "the total revenue per month"),
          ("books(id, title, author, year)", "all authors who wrote more than two books"),
          ("flights(id, origin, destination, minutes)", "the longest flight from each origin")]
SHELL_TASKS = ["finds every file larger than 100 MB in a directory", "replaces 'foo' with 'bar' in all .txt files",
               "prints the ten most frequent words in a text file", "counts the number of lines in a CSV file",
               "lists the five largest files in the current directory", "shows which process uses port 8080",
               "deletes log files older than seven days", "prints the disk usage of every subfolder"]
ITEMS = ["apples", "books", "pencils", "tickets", "cookies", "marbles", "stamps", "shirts", "oranges", "cards",
         "candles", "bottles", "eggs", "stickers", "notebooks", "flowers"]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena", "Mateo",
         "Nora", "Omar", "Priya", "Quinn", "Rosa", "Sami", "Tariq"]
CITIES = ["Paris", "Tokyo", "Cairo", "Lima", "Oslo", "Nairobi", "Sydney", "Toronto", "Mumbai", "Berlin",
          "Mexico City", "Seoul", "Rome", "Lisbon", "Buenos Aires", "Istanbul"]
COUNTRIES = ["Japan", "Brazil", "Kenya", "Canada", "India", "Italy", "Norway", "Peru", "Egypt", "Australia",
             "Germany", "Vietnam", "Mexico", "Spain", "Morocco", "Chile"]
SENTENCES = ["the meeting was moved to thursday because the room was double booked",
             "our team shipped the new feature two weeks late but users love it",
             "i think we should reconsider the budget before we hire anyone else",
             "the train was delayed so i missed the first half of the concert",
             "please send me the report by friday so i can review it over the weekend",
             "the new cafe downtown has great coffee but the chairs are uncomfortable",
             "he forgot his umbrella and got completely soaked on the way home",
             "we need more volunteers for the charity run next month",
             "the printer on the second floor is broken again and nobody knows who to call",
             "my sister is visiting next week so i will be working from home",
             "the results of the survey were surprising and we should discuss them",
             "can you remind everyone that the office closes early on friday",
             "the package arrived damaged and i would like a refund",
             "we decided to postpone the product launch until the spring",
             "the kids had a great time at the museum and want to go back"]
CASUAL = ["yo, the server's down again, can someone fix it??", "cant make it 2day, sorry, something came up",
          "thx for the help yesterday, u saved me", "pls check the numbers b4 the meeting",
          "the food was ok i guess but way too expensive", "gonna be late, traffic is crazy",
          "who ate my lunch from the fridge", "need the slides by tmrw morning, k?"]
GRAMMAR = ["He go to the gym every days.", "Their is many reasons to learn coding.", "Me and him was late yesterday.",
           "The childrens plays in the park.", "I has finished my homework already.",
           "She dont know where is the station.", "We was happy with the results of the tests.",
           "Everyone have their own opinion about it."]
LIST_KINDS = ["tips for staying focused", "ways to save money", "healthy breakfast ideas", "questions to ask in an "
              "interview", "reasons to learn a second language", "things to pack for a camping trip",
              "habits of good programmers", "ideas for a rainy afternoon", "ways to reduce plastic waste",
              "tips for a first job", "ways to make new friends in a new city", "tips for writing clear emails",
              "ideas for a birthday party", "ways to stay healthy while working from home", "cheap date ideas",
              "tips for learning to cook", "ways to improve your memory", "board games for a family evening",
              "tips for running a good meeting", "ways to keep a small garden", "tips for traveling on a budget"]
THINGS = ["a bicycle", "a smartphone", "a library card", "an umbrella", "a laptop", "a passport", "a kettle",
          "a houseplant", "a pair of running shoes", "a backpack", "a calendar", "a dictionary"]
DISHES = ["pancakes", "a tomato pasta", "a fruit salad", "fried rice", "lentil soup", "a vegetable curry",
          "banana bread", "an omelette", "guacamole", "a chicken sandwich", "roasted potatoes", "hummus"]
BUSINESSES = ["a bookshop", "a bike repair shop", "a flower shop", "a cafe", "a dog grooming service",
              "a language school", "a bakery", "a yoga studio", "a computer repair shop", "a food truck"]
EVENTS = ["a job interview", "a team offsite", "a wedding", "a marathon", "an exam", "a move to a new city",
          "a first day at school", "a product launch", "a family reunion", "a long flight"]
PAIRS = [("a laptop", "a tablet"), ("tea", "coffee"), ("renting", "buying a home"), ("trains", "planes"),
         ("email", "instant messaging"), ("paper books", "e-books"), ("running", "swimming"),
         ("cities", "the countryside"), ("summer", "winter"), ("Python", "JavaScript"), ("cats", "rabbits"),
         ("working from home", "working in an office"), ("saving", "investing"), ("buses", "bicycles")]
UNITS = ["kilometres into metres", "hours into minutes", "kilograms into grams", "minutes into seconds",
         "litres into millilitres"]
THANKS_FOR = ["the birthday gift", "helping me move", "the great advice", "covering my shift"]
STORY_TWISTS = ["can talk", "goes missing", "brings luck", "travels the world"]
ANNOUNCEMENTS = ["a new podcast", "a charity run", "an open day", "a new app"]


def _code(rng: random.Random) -> list[str]:
    lang, task = rng.choice(LANGS), rng.choice(CODE_TASKS)
    table, goal = rng.choice(TABLES)
    return [
        f"Write a {lang} function that {task}.",
        f"Write a Python function that {task}, with a docstring and an example.",
        f"How would you write a function that {task} in {lang}? Explain briefly and show the code.",
        f"Explain what this code does: {rng.choice(SNIPPETS)}",
        f"Find and fix the bug in this Python code: {rng.choice(BUGGY)}",
        f"Write an SQL query over the table {table} that returns {goal}.",
        f"Write a shell command that {rng.choice(SHELL_TASKS)}.",
        f"What is the difference between a {rng.choice(['list', 'set', 'dictionary', 'tuple', 'string'])} and a "
        f"{rng.choice(['array', 'queue', 'stack', 'generator', 'class'])} in {lang}?",
        f"Write a {lang} program that prints the numbers from 1 to {rng.randint(5, 60)}, one per line.",
        f"Write unit tests for a function that {task}.",
    ]


def _math(rng: random.Random) -> list[str]:
    who, other, item = rng.choice(NAMES), rng.choice(NAMES), rng.choice(ITEMS)
    a, b, c = rng.randint(3, 90), rng.randint(2, 15), rng.randint(2, 12)
    return [
        f"{who} has {a} {item} and buys {b} bags with {c} {item} each. How many {item} does {who} have now? "
        f"Show your reasoning.",
        f"A shop sells {item} at {c} dollars each. How much do {a} {item} cost, and how much change is left "
        f"from {a * c + b * 5} dollars?",
        f"What is {a} times {b}, plus {c}? Answer step by step.",
        f"What is {rng.choice([5, 10, 12, 15, 20, 25, 30, 40, 75])} percent of {rng.randint(2, 60) * 20}?",
        f"Solve for x: {b}x + {c} = {b * rng.randint(1, 12) + c}.",
        f"A car drives {a * 10} km in {c} hours. What is its average speed?",
        f"{who} is {b} years older than {other}. Together they are {2 * a + b} years old. How old is each of them?",
        f"A rectangle is {a} cm long and {b} cm wide. What are its area and its perimeter?",
        f"Convert {a} {rng.choice(UNITS)}.",
        f"A recipe for {c} people needs {a * 10} grams of rice. How much rice is needed for {c + b} people?",
        f"What is the sum of the whole numbers from 1 to {a}?",
        f"{who} reads {b} pages a day. How many days does a {a * b + c}-page book take?",
        f"Is {a * 2 + 1} a prime number? Explain how you check.",
        f"What is the average of {a}, {b}, {c} and {a + b}?",
    ]


def _explain(rng: random.Random) -> list[str]:
    t, t2, aud = rng.choice(TOPICS), rng.choice(TOPICS), rng.choice(AUDIENCES)
    x, y = rng.choice(PAIRS)
    return [
        f"Explain {t} to {aud} in a short paragraph.",
        f"What is {t}?",
        f"How does {t} work?",
        f"Why does {t} matter? Answer in {rng.choice(['two', 'three', 'four'])} sentences.",
        f"What are the main advantages and disadvantages of {t}?",
        f"Summarise the idea of {t} in one sentence, then give an example.",
        f"Compare {t} and {t2} in three sentences.",
        f"What are the main differences between {x} and {y}?",
        f"Give me {rng.randint(3, 6)} {rng.choice(LIST_KINDS)}.",
        f"What is the capital of {rng.choice(COUNTRIES)}, and what is it known for?",
        f"What should a visitor see in {rng.choice(CITIES)} in one day?",
        f"How do I prepare for {rng.choice(EVENTS)}?",
        f"Recommend a simple recipe for {rng.choice(DISHES)}.",
        f"How do I take care of {rng.choice(THINGS)} so it lasts longer?",
        f"Suggest three names for {rng.choice(BUSINESSES)}.",
        f"What are common myths about {t}?",
        f"Which is better for {aud}: {x} or {y}? Give reasons.",
    ]


def _rewrite(rng: random.Random) -> list[str]:
    s = rng.choice(SENTENCES)
    return [
        f"Rewrite this sentence with correct capitalisation and punctuation: {s}",
        f"Rewrite this message in a formal tone: '{rng.choice(CASUAL)}'",
        f"Correct the grammar: '{rng.choice(GRAMMAR)}'",
        f"Summarise in one sentence: {s.capitalize()}, and {rng.choice(SENTENCES)}.",
        f"Translate into simple English for {rng.choice(AUDIENCES)}: {s}.",
        f"Make this sentence shorter without losing its meaning: '{s.capitalize()}.'",
        f"Turn this into a bulleted list of steps: first {rng.choice(['wash', 'chop', 'peel'])} the vegetables, then "
        f"{rng.choice(['heat', 'warm'])} the oil, then cook for {rng.randint(5, 20)} minutes and finally season "
        f"with salt.",
        f"Paraphrase this sentence in two different ways: '{s.capitalize()}.'",
        f"Rewrite this sentence to sound more positive: '{s.capitalize()}.'",
        f"Turn these words into a short paragraph: {', '.join(rng.sample(ITEMS, 4))}, {rng.choice(CITIES)}.",
    ]


def _write(rng: random.Random) -> list[str]:
    t, who = rng.choice(TOPICS), rng.choice(NAMES)
    return [
        f"Write a short poem about {t}.",
        f"Write an email to {who} asking to reschedule our call about {t}.",
        f"Write a polite email {rng.choice(['declining', 'accepting'])} an invitation to {rng.choice(EVENTS)}.",
        f"Write a thank-you note to {who} for {rng.choice(THANKS_FOR)}.",
        f"Write a short story about {rng.choice(THINGS)} that {rng.choice(STORY_TWISTS)}.",
        f"Write a product description for {rng.choice(THINGS)}.",
        f"Write a short advertisement for {rng.choice(BUSINESSES)} in {rng.choice(CITIES)}.",
        f"Write a tweet announcing {rng.choice(ANNOUNCEMENTS)} about {t}.",
        f"Write a haiku about {rng.choice(['autumn', 'the sea', 'a city at night', 'snow', 'coffee', 'a cat'])}.",
        f"Write a short motivational message for someone preparing for {rng.choice(EVENTS)}.",
    ]


FAMILIES = (_code, _math, _explain, _rewrite, _write)


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"[a-z0-9]+", text.lower()))


def near_duplicate(a: frozenset[str], b: frozenset[str]) -> bool:
    """Word-set Jaccard similarity >= NEAR_DUPLICATE ("What is the sum of the whole numbers from 1 to 50?" and
    "What is the sum of all whole numbers from 1 to 50?" are near duplicates)."""
    return len(a & b) >= NEAR_DUPLICATE * len(a | b)


def training_prompts(n: int, seed: int = 0) -> list[str]:
    """`n` distinct prompts, none equal or close to an evaluation prompt (`smoke`); the families take turns."""
    from .smoke import load_smoke  # the module, not the package: the package's demo-heldout uses us

    held_out = [_words(p.messages[-1]["content"]) for p in load_smoke()]
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < 50 * n:
        family = FAMILIES[tries % len(FAMILIES)]
        tries += 1
        p = rng.choice(family(rng))
        if p in seen:
            continue
        seen.add(p)
        w = _words(p)
        if not any(near_duplicate(w, h) for h in held_out):
            out.append(p)
    return out


@functools.lru_cache(maxsize=16)
def prompts_digest(n: int, seed: int = 0) -> str:
    """Hash of the prompts `training_prompts(n, seed)` gives: part of the cached data's and drafter's identity,
    so editing a template never reuses responses, features or a drafter made from the old prompts."""
    return hashlib.sha256(json.dumps(training_prompts(n, seed)).encode()).hexdigest()[:12]
